"""Durable subscriptions: a broker's local clients' profiles in SQLite.

The table is ``profiles(id TEXT PRIMARY KEY, subscriber TEXT NOT NULL, type TEXT NOT NULL,
text TEXT NOT NULL)`` where ``id`` is ``<client>/<profile id>`` and ``text`` is
``format_profile`` of the profile under that id (so other tools, e.g. the Spark pipeline,
can read the table as a subscription source with ``parse_profile``). On a secured
network ``owners(client TEXT PRIMARY KEY, principal TEXT NOT NULL)`` records which
principal each client name belongs to.

Changes of one request go in one transaction (:meth:`ProfileStore.begin`,
:meth:`~ProfileStore.commit`, :meth:`~ProfileStore.rollback`): the broker applies them
to its table only when the store took them, and undoes both on any failure, so the
table in memory and the store never disagree. Every failure is a
:class:`~siftbus.errors.SiftbusError`.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from siftbus.errors import (
    ConfigError,
    DuplicateProfileError,
    EnvironmentProblem,
    ProfileError,
    WireError,
)
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.match.ingest import scan_profile_texts
from siftbus.model import Profile, Schema

log = logging.getLogger("siftbus.broker")

_DDL = ("CREATE TABLE IF NOT EXISTS profiles (id TEXT PRIMARY KEY, subscriber TEXT NOT NULL, "
        "type TEXT NOT NULL, text TEXT NOT NULL)")
_OWNERS_DDL = ("CREATE TABLE IF NOT EXISTS owners (client TEXT PRIMARY KEY, "
               "principal TEXT NOT NULL)")


class ProfileStore:
    """The durable profile table of one broker."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(str(self.path), isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_DDL)
            self._db.execute(_OWNERS_DDL)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open subscription store: {exc}",
                              source=str(self.path)) from None

    def _run(self, sql: str, args: tuple[str, ...] = ()) -> None:
        try:
            self._db.execute(sql, args)
        except sqlite3.IntegrityError:
            raise DuplicateProfileError(f"profile {args[0][:200]!r} is already stored",
                                        field=args[0][:200]) from None
        except UnicodeEncodeError as exc:
            raise WireError(f"profile {args[0][:200]!r} holds text that is not valid "
                            f"Unicode ({exc.reason})", field="string") from None
        except sqlite3.Error as exc:
            raise EnvironmentProblem(f"subscription store {self.path}: {exc}") from None

    def begin(self) -> None:
        """Start a transaction (ended by :meth:`commit` or :meth:`rollback`)."""
        self._run("BEGIN")

    def commit(self) -> None:
        self._run("COMMIT")

    def rollback(self) -> None:
        """Undo the open transaction (nothing happens when none is open)."""
        if self._db.in_transaction:
            self._run("ROLLBACK")

    def insert(self, client: str, profile: Profile) -> None:
        """Store a new ``profile`` of ``client`` (its id is the client's id);
        :class:`~siftbus.errors.DuplicateProfileError` if the client has one by that id."""
        self._write("INSERT", client, profile)

    def put(self, client: str, profile: Profile) -> None:
        """Store (or replace) ``profile`` of ``client``; its id is the client's id."""
        self._write("INSERT OR REPLACE", client, profile)

    def _write(self, verb: str, client: str, profile: Profile) -> None:
        sid = f"{client}/{profile.id}"
        text = format_profile(profile.with_id(sid, client))
        self._run(f"{verb} INTO profiles VALUES (?, ?, ?, ?)",
                  (sid, client, profile.etype.name, text))

    def delete(self, client: str, pid: str) -> None:
        self._run("DELETE FROM profiles WHERE id = ?", (f"{client}/{pid}",))

    def delete_client(self, client: str) -> None:
        """Forget every profile of ``client`` (a session that moved to another broker)."""
        self._run("DELETE FROM profiles WHERE subscriber = ?", (client,))

    def load(self, schema: Schema, *, fast: bool | None = None) -> list[tuple[str, Profile]]:
        """Every stored ``(client, profile)``, the profile under the client's own id.

        The rows are read by the compiled profile scanner in bulk
        (:func:`~siftbus.match.ingest.scan_profile_texts`; ``fast`` forces it on or off,
        default: on for a store of more than 256 KiB of text or when the process already
        runs compiled kernels); a row it does not take is parsed by the grammar, which
        gives its value or its error, located at ``<store path>:<row id>``."""
        try:
            rows = self._db.execute(
                "SELECT id, subscriber, text, type FROM profiles ORDER BY rowid").fetchall()
        except sqlite3.Error as exc:
            raise EnvironmentProblem(f"subscription store {self.path}: {exc}") from None
        # a profile of a type the schema no longer has stays in the store, inert: the
        # broker starts without it (a session's clean start, or its client's
        # unsubscription, deletes it; the type back in the schema restores it)
        aside = [(sid, t) for sid, _, _, t in rows if t not in schema]
        if aside:
            log.warning("subscription store %s: %d profiles of types the schema no longer "
                        "has are left aside: %s", self.path, len(aside),
                        ", ".join(f"{sid} ({t})" for sid, t in aside[:20]))
            rows = [r for r in rows if r[3] in schema]
        out = []
        for (sid, client, text, _), p in zip(rows, scan_profile_texts(
                [text for _, _, text, _ in rows], schema, fast=fast), strict=True):
            if p is None:
                p = self._parse_row(sid, client, text, schema)
            out.append((client, p.with_id(sid[len(client) + 1:], client)))
        return out

    def _parse_row(self, sid: object, client: object, text: object, schema: Schema
                   ) -> Profile:
        """A row the scanner left to the grammar (its value, or its error naming the
        store and the row)."""
        source = f"{self.path}:{str(sid)[:200]}"
        if not isinstance(sid, str) or not isinstance(client, str) \
                or not isinstance(text, str):
            raise ProfileError("the stored row is not text (the store is damaged)",
                               source=source)
        return parse_profile(text, schema, source=source)

    @property
    def connection(self) -> sqlite3.Connection:
        """The database connection (the session store keeps its tables in the same
        file, :mod:`.session_store`)."""
        return self._db

    def bind_owner(self, client: str, principal: str) -> None:
        """Record that the client name ``client`` belongs to ``principal`` (on a secured
        network: its durable session cannot be taken by another principal)."""
        self._run("INSERT OR REPLACE INTO owners VALUES (?, ?)", (client, principal))

    def owners(self) -> dict[str, str]:
        """Every recorded client name and its principal."""
        return dict(self._db.execute("SELECT client, principal FROM owners"))

    def close(self) -> None:
        self._db.close()


def read_rows(path: str | Path) -> list[tuple[str, str, str, str]]:
    """Every row ``(id, subscriber, type, text)`` of the profile table of the store at
    ``path``, in id order, read through a read-only connection: for readers beside the
    broker, such as the Spark pipeline following a running broker's store."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("no subscription store here", source=str(p))
    try:
        db = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True, timeout=10)
        try:
            rows = db.execute(
                "SELECT id, subscriber, type, text FROM profiles ORDER BY id").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot read the subscription store: {exc}", source=str(p)) from None
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]


__all__ = ["ProfileStore", "read_rows"]
