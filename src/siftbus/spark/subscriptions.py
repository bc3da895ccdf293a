"""Where the subscription set comes from, and how a running job follows its changes.

Two sources:

* a profile file (one profile per line, see DESIGN.md);
* a broker's durable store (a SQLite file, see :mod:`siftbus.broker.store`, which owns
  the table and reads it for us), each row's ``text`` being a profile line.

:class:`SubscriptionSet` keeps one live matcher and applies the difference between the
set it holds and what the source says now (add, remove, replace), then compiles a new
versioned :class:`~siftbus.spark.match_stage.MatchPlan`. A streaming job calls
:meth:`SubscriptionSet.refresh` between micro-batches, so changes take effect at the next
batch without restarting the query.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from siftbus.broker.store import read_rows
from siftbus.errors import ProfileError, SiftbusError
from siftbus.lang.profile import iter_profile_lines, parse_profile, read_profile_lines
from siftbus.match.base import BulkLoading
from siftbus.match.columns import ProfileColumns
from siftbus.match.ingest import load_profile_columns, scan_profile_texts
from siftbus.model import Profile, Schema
from siftbus.spark.match_stage import MatchPlan, build_plan, new_matcher


class ProfileSource(Protocol):
    """Something that lists the current profiles."""

    @property
    def name(self) -> str:
        """Where the profiles come from, for messages."""

    def fingerprint(self) -> str:
        """Changes whenever the profiles may have changed (cheap to compute)."""

    def load(self, schema: Schema, *, strict: bool = True) -> list[Profile]:
        """Every profile; with ``strict``, the first bad one raises, else bad ones are
        reported on stderr and skipped (a running stream must not die of one bad row)."""


@dataclass(frozen=True, slots=True)
class ProfileFile:
    """Profiles from a text file, one per line."""

    path: Path

    @property
    def name(self) -> str:
        return str(self.path)

    def fingerprint(self) -> str:
        try:
            st = self.path.stat()
        except OSError as exc:
            raise ProfileError(f"cannot read profiles: {exc.strerror}",
                               source=str(self.path)) from None
        return f"{st.st_mtime_ns}:{st.st_size}"

    def load_columns(self, schema: Schema) -> list[ProfileColumns]:
        """Every profile as columns, one per event type (strict: the first bad line
        raises), for a matcher's bulk load without a Profile object per line."""
        return load_profile_columns(self.path, schema)

    def load(self, schema: Schema, *, strict: bool = True) -> list[Profile]:
        # The compiled scanners (match.ingest) give the same profiles and the same first
        # error as the grammar; a file with a bad line is read again line by line when
        # bad lines are to be skipped (a running stream's refresh), else the error stands.
        try:
            if not schema.extended:  # extended profiles have no columns (issue 31)
                return [p for cols in load_profile_columns(self.path, schema)
                        for p in cols.profiles()]
        except SiftbusError:
            if strict:
                raise
        out: list[Profile] = []
        lines = read_profile_lines(self.path)  # the one rule for text files
        for item in iter_profile_lines(lines, schema, source=str(self.path)):
            if isinstance(item, SiftbusError):
                if strict:
                    raise item
                print(f"siftbus: skipped profile: {item}", file=sys.stderr)
                continue
            out.append(item)
        return out


@dataclass(frozen=True, slots=True)
class StoredProfiles:
    """Profiles from a broker's durable store (:mod:`siftbus.broker.store`), read only."""

    path: Path

    @property
    def name(self) -> str:
        return f"sqlite:{self.path}"

    def fingerprint(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for row in read_rows(self.path):
            h.update("\x1f".join(row).encode())
            h.update(b"\x1e")
        return h.hexdigest()

    def load(self, schema: Schema, *, strict: bool = True) -> list[Profile]:
        """The stored profiles, read in bulk by the compiled profile scanner (as a
        broker's restart reads its store); a row it leaves -- one without an id, a bad
        one -- goes to the grammar, which gives its value or its error."""
        out: list[Profile] = []
        rows = read_rows(self.path)
        scanned = scan_profile_texts([text for *_, text in rows], schema)
        for n, ((pid, subscriber, tname, text), p) in enumerate(
                zip(rows, scanned, strict=True), start=1):
            try:
                if p is None:
                    p = parse_profile(text, schema, id=pid, source=f"{self.path}[{pid}]")
                if p.type_name != tname:
                    raise ProfileError(f"row says type {tname!r} but the profile is a "
                                       f"{p.type_name}", source=f"{self.path}[{pid}]",
                                       field="type")
                out.append(p.with_id(pid, subscriber))
            except SiftbusError as exc:
                if strict:
                    raise exc.located(line=n) from None
                print(f"siftbus: skipped profile: {exc}", file=sys.stderr)
        return out


def profile_source(spec: str | Path) -> ProfileSource:
    """A profile file, or a store given as ``sqlite:PATH`` or a ``.db``/``.sqlite`` file."""
    text = str(spec)
    if text.startswith("sqlite:"):
        return StoredProfiles(Path(text.removeprefix("sqlite:")))
    path = Path(text)
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        return StoredProfiles(path)
    return ProfileFile(path)


class SubscriptionSet:
    """The current subscription set of a job, compiled for the match stage."""

    def __init__(self, schema: Schema, source: ProfileSource, *, engine: str = "index") -> None:
        self.schema = schema
        self.schema_text = schema.to_toml()
        self.source = source
        self.engine = engine
        self.version = 0
        self._fingerprint: str | None = None
        self._held: dict[str, Profile] = {}
        self._columns: list[ProfileColumns] = []
        """The first load, when it went into the matcher in bulk: its Profile objects are
        made only when a later change needs them (:attr:`_profiles`)."""
        self._matcher = new_matcher(engine)
        self._plan: MatchPlan | None = None
        self.changes = 0
        """Profile adds, removes and replacements applied since the start."""
        self.refresh(strict=True)

    @property
    def _profiles(self) -> dict[str, Profile]:
        """Id -> profile of the current set."""
        if self._columns:
            self._held = {p.id: p for cols in self._columns for p in cols.profiles()}
            self._columns = []
        return self._held

    def __len__(self) -> int:
        return sum(map(len, self._columns)) if self._columns else len(self._held)

    @property
    def profiles(self) -> Sequence[Profile]:
        return list(self._profiles.values())

    def refresh(self, *, strict: bool = False) -> bool:
        """Re-read the source if it changed; True when the set changed."""
        fp = self.source.fingerprint()
        if fp == self._fingerprint and self._plan is not None:
            return False
        if self._plan is None and strict and self._bulk_load():
            self._fingerprint = fp
            changed = len(self) > 0
        else:
            fresh = {p.id: p for p in self.source.load(self.schema, strict=strict)}
            self._fingerprint = fp
            changed = self._apply(fresh)
        if changed or self._plan is None:
            self.version += 1
            self._plan = build_plan(self.schema_text, (), matcher=self._matcher)
        return changed

    def _bulk_load(self) -> bool:
        """The first load of a profile file into a matcher that takes columns: one bulk
        step per event type (the scanners' columns, no Profile object per line). Returns
        whether it applied; the first bad line raises, as a strict load does."""
        load = getattr(self.source, "load_columns", None)
        if (load is None or not isinstance(self._matcher, BulkLoading)
                or self.schema.extended):  # extended profiles: one at a time (issue 31)
            return False
        columns = load(self.schema)
        for cols in columns:
            self._matcher.add_columns(cols)
        self._columns = [c for c in columns if len(c)]
        self.changes += sum(map(len, columns))
        return True

    def _apply(self, fresh: dict[str, Profile]) -> bool:
        old = self._profiles
        removed = [pid for pid in old if pid not in fresh]
        added = [p for pid, p in fresh.items() if pid not in old]
        replaced = [p for pid, p in fresh.items()
                    if pid in old and (old[pid].filter_key != p.filter_key
                                       or old[pid].subscriber != p.subscriber)]
        for pid in removed:
            self._matcher.remove(pid)
        for p in replaced:
            self._matcher.remove(p.id)
            self._matcher.add(p)
        for p in added:
            self._matcher.add(p)
        for pid in removed:
            del old[pid]
        for p in (*replaced, *added):
            old[p.id] = p
        n = len(removed) + len(added) + len(replaced)
        self.changes += n
        return n > 0

    def plan(self) -> MatchPlan:
        """The compiled set for the current version."""
        assert self._plan is not None
        return self._plan


__all__ = [
    "ProfileFile",
    "ProfileSource",
    "StoredProfiles",
    "SubscriptionSet",
    "profile_source",
]
