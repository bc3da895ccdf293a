"""Sessions in the broker's SQLite store: durable across a restart, also a kill -9.

Two tables beside the durable profiles (:mod:`.store`), in the same file::

    sessions(id TEXT PRIMARY KEY, meta BLOB)            -- msgpack of Session.meta()
    session_chunks(session TEXT, first INTEGER, last INTEGER, data BLOB,
                   PRIMARY KEY (session, first))        -- msgpack of Chunk.to_wire()

A chunk is written once, in the same transaction as the session's counters, before any
of its rows is sent, so after a crash no number is given twice and none that was sent is
missing. Acknowledged and dropped rows are deleted by number; a chunk acknowledged in
part stays until its last row is, and is cut when loaded. The profiles of a session are
the durable profiles of its client name (the session id), in the profiles table.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import msgpack

from siftbus.errors import EnvironmentProblem, SiftbusError, WireError
from siftbus.model import Schema

from .sessions import Chunk, Session, SessionLimits
from .store import ProfileStore

log = logging.getLogger("siftbus.broker")

_DDL = (
    "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, meta BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS session_chunks (session TEXT NOT NULL, first INTEGER NOT "
    "NULL, last INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (session, first))",
)


class SessionStore:
    """The sessions of one broker, in its profile store's database."""

    def __init__(self, store: ProfileStore) -> None:
        self.store = store
        self._db = store.connection
        with self._write():
            for ddl in _DDL:
                self._db.execute(ddl)

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction (or part of the one already open)."""
        db = self._db
        own = not db.in_transaction
        try:
            if own:
                db.execute("BEGIN")
            yield
            if own:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            if own and db.in_transaction:
                db.execute("ROLLBACK")
            raise EnvironmentProblem(f"session store {self.store.path}: {exc}") from None
        except BaseException:
            if own and db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def put_meta(self, s: Session) -> None:
        with self._write():
            self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)",
                             (s.id, msgpack.packb(s.meta(), use_bin_type=True)))

    def append(self, s: Session, chunks: list[Chunk]) -> None:
        """New rows and the counters they moved, in one transaction."""
        with self._write():
            self._db.executemany(
                "INSERT OR REPLACE INTO session_chunks VALUES (?, ?, ?, ?)",
                [(s.id, c.first, c.last, msgpack.packb(c.to_wire(), use_bin_type=True))
                 for c in chunks])
            self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)",
                             (s.id, msgpack.packb(s.meta(), use_bin_type=True)))

    def trim(self, s: Session) -> None:
        """Forget rows acknowledged or dropped (by number)."""
        upto = max(s.acked, s.lost)
        with self._write():
            self._db.execute("DELETE FROM session_chunks WHERE session = ? AND last <= ?",
                             (s.id, upto))
            self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)",
                             (s.id, msgpack.packb(s.meta(), use_bin_type=True)))

    def replace(self, s: Session) -> None:
        """Store a whole session anew (it arrived by a handoff)."""
        with self._write():
            self._db.execute("DELETE FROM session_chunks WHERE session = ?", (s.id,))
            self._db.executemany(
                "INSERT INTO session_chunks VALUES (?, ?, ?, ?)",
                [(s.id, c.first, c.last, msgpack.packb(c.to_wire(), use_bin_type=True))
                 for c in s.chunks])
            self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)",
                             (s.id, msgpack.packb(s.meta(), use_bin_type=True)))

    def delete(self, sid: str) -> None:
        with self._write():
            self._db.execute("DELETE FROM session_chunks WHERE session = ?", (sid,))
            self._db.execute("DELETE FROM sessions WHERE id = ?", (sid,))

    def load(self, schema: Schema, limits: SessionLimits, now: float) -> list[Session]:
        """Every stored session with its rows (away: nobody is attached after a start)."""
        out = []
        rows = self._db.execute("SELECT id, meta FROM sessions ORDER BY id").fetchall()
        for sid, meta in rows:
            s = Session(sid, limits, now)
            aside = 0
            try:
                s.load_meta(msgpack.unpackb(meta, raw=False), now)
                chunks = []
                for (data,) in self._db.execute(
                        "SELECT data FROM session_chunks WHERE session = ? ORDER BY first",
                        (sid,)):
                    d = msgpack.unpackb(data, raw=False)
                    if isinstance(d, dict) and isinstance(d.get("t"), str) \
                            and d["t"] not in schema:
                        aside += int(d.get("n", 0))  # its numbers are a gap to the client
                        continue
                    chunks.append(Chunk.from_wire(d, schema))
            except (SiftbusError, ValueError, msgpack.UnpackException) as exc:
                raise WireError(f"session store {self.store.path}: session {sid!r} cannot "
                                f"be read: {exc}", source=str(self.store.path)) from None
            if aside:
                log.warning("session store %s: session %s: %d rows of types the schema "
                            "no longer has are not delivered", self.store.path, sid, aside)
            s.load_chunks(chunks)
            s.away_since = now  # its expiry runs from the restart
            out.append(s)
        return out


__all__ = ["SessionStore"]
