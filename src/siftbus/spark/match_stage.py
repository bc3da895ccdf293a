"""The match stage: keyed Arrow batches in, CSR matches out, inside ``mapInArrow``.

The driver takes a snapshot of the subscription set once per version and broadcasts it;
each executor runs :func:`match_batch` on its Arrow batches. Any engine of the registry
with the ``snapshot`` capability (:data:`siftbus.match.engines.Capability.SNAPSHOT`)
serves: its snapshot's ``match_columns`` takes one type's key columns and returns CSR
arrays (offsets, dense profile indices) whose rows are already in code-point order of
the ids. ``index`` (the default) does it in one kernel call without a Python object per
match; ``reference`` rebuilds every event and asks every profile, for differential tests.

Output rows (one per event, also when nothing matches)::

    source string, event long, type string, matches array<string>, owners array<string>,
    version long, text string

``matches`` holds profile ids sorted by code point (the order ``siftbus match`` prints);
``owners[i]`` is the subscriber of ``matches[i]`` (or the profile id when it has none).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from siftbus.match.base import BulkLoading, Matcher, Snapshot, Snapshotting
from siftbus.match.columns import ProfileColumns
from siftbus.match.engines import Capability, engine, names
from siftbus.model import Event, Profile, Schema
from siftbus.spark.keyed import layouts_for, schema_from_text

MATCHED_SCHEMA = pa.schema([
    ("source", pa.string()),
    ("event", pa.int64()),
    ("type", pa.string()),
    ("matches", pa.list_(pa.string())),
    ("owners", pa.list_(pa.string())),
    ("version", pa.int64()),
    ("text", pa.string()),
])
"""Arrow schema of the match stage's output."""

MATCHED_DDL = ("source string, event long, type string, matches array<string>, "
               "owners array<string>, version long, text string")
"""The same schema as a Spark DDL string."""

@dataclass(slots=True)
class MatchPlan:
    """What executors receive (broadcast): a matcher's snapshot and the schema it is for."""

    schema_text: str
    snapshot: Snapshot
    _ids: pa.Array | None = field(default=None, repr=False)
    _owners: pa.Array | None = field(default=None, repr=False)
    _owner_codes: tuple[np.ndarray, pa.Array] | None = field(default=None, repr=False)

    def __getstate__(self) -> tuple[str, Snapshot]:
        return self.schema_text, self.snapshot

    def __setstate__(self, state: tuple[str, Snapshot]) -> None:
        self.schema_text, self.snapshot = state
        self._ids = self._owners = self._owner_codes = None

    def owner_codes(self) -> tuple[np.ndarray, pa.Array]:
        """Per dense index the code of its owner, and the distinct owners by code (made
        once per worker: the broadcast value outlives its tasks)."""
        if self._owner_codes is None:
            _, owners = self.derived()
            enc = owners.dictionary_encode()
            self._owner_codes = (enc.indices.to_numpy(zero_copy_only=False), enc.dictionary)
        return self._owner_codes

    @property
    def version(self) -> int:
        return self.snapshot.version

    def derived(self) -> tuple[pa.Array, pa.Array]:
        """Arrow arrays of the ids and owners by dense index."""
        if self._ids is None or self._owners is None:
            self._ids = pa.array(self.snapshot.profile_ids, pa.string())
            self._owners = pa.array(self.snapshot.owners, pa.string())
        return self._ids, self._owners


def _pick(col: pa.Array, rows: pa.Array | None) -> pa.Array:
    """``col`` gathered at ``rows`` (``None``: all of it, no copy)."""
    return col if rows is None else col.take(rows)


def _column_numpy(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def match_parts(plan: MatchPlan, batch: pa.RecordBatch
                ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Match one keyed batch type by type: per type, the batch's rows of it, and the CSR
    (offsets, dense profile indices) of their matches in code-point order of the ids."""
    layouts = layouts_for(plan.schema_text)
    n = batch.num_rows
    types = batch.column("type")
    if n == 0:
        return
    enc = types.dictionary_encode() if not isinstance(types, pa.DictionaryArray) else types
    codes = enc.indices.to_numpy(zero_copy_only=False)
    dict_names = enc.dictionary.to_pylist()
    for code, tname in enumerate(dict_names):
        rows = np.flatnonzero(codes == code)
        if len(rows) == 0:
            continue
        layout = layouts.get(tname)
        if layout is None:
            # The parse stage rejects unknown types; a keyed source that slipped one past
            # it matches nothing rather than crashing the whole job.
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            hits = np.zeros(0, dtype=np.int32)
        elif layout.extended:
            sk_col = batch.column("skeys").take(pa.array(rows, pa.int64()))
            etype = schema_from_text(plan.schema_text)[tname]
            events = [Event(etype, layout.join((), [text]))
                      for text in sk_col.flatten().to_pylist()]
            offsets, hits = _extended_matches(plan.snapshot, etype.name, events)
        else:
            # One type per batch is the common case: then the columns need no gather.
            whole = len(rows) == n
            take = pa.array(rows, pa.int64())
            ik = batch.column("ikeys") if whole else batch.column("ikeys").take(take)
            k = len(layout.ordered)
            flat = _column_numpy(ik.flatten()).astype(np.int64, copy=False)
            ikeys = flat.reshape(len(rows), k) if k else np.zeros((len(rows), 0), np.int64)
            columns: dict[str, np.ndarray] = {
                name: np.ascontiguousarray(ikeys[:, j]) for j, name in enumerate(layout.ordered)}
            if layout.strings:
                sk_col = batch.column("skeys") if whole else batch.column("skeys").take(take)
                sk = _column_numpy(sk_col.flatten())
                s = sk.reshape(len(rows), len(layout.strings))
                columns.update((name, s[:, j]) for j, name in enumerate(layout.strings))
            csr = plan.snapshot.match_columns(layout.name, columns)
            offsets, hits = csr.offsets, csr.profiles
        yield rows, offsets, hits


def _extended_matches(snapshot: Snapshot, type_name: str, events: Sequence[Event]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """CSR matches of events of an extended type, by the reference semantics: their
    profiles are all in the snapshot's side list (``match.residual``) or, for the
    reference engine, the snapshot itself; each type's profiles are sorted by id there."""
    side: Any = getattr(snapshot, "side", snapshot)
    shift = len(snapshot.inner) if side is not snapshot else 0  # type: ignore[attr-defined]
    lo, hi = getattr(side, "type_offset", {}).get(type_name, (0, 0))
    mine = list(enumerate(side.profiles[lo:hi], start=lo + shift)) if hi > lo else []
    offsets = [0]
    hits: list[int] = []
    for ev in events:
        hits.extend(i for i, p in mine if p.matches(ev))
        offsets.append(len(hits))
    return np.array(offsets, np.int64), np.array(hits, np.int32)


def match_batch(plan: MatchPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Match one keyed batch; rows come out grouped by type, each with its sorted matches."""
    ids, owners = plan.derived()
    names = batch.schema.names
    n = batch.num_rows
    types = batch.column("type")
    parts: list[pa.RecordBatch] = []
    for rows, offsets, hits in match_parts(plan, batch):
        take_rows = None if len(rows) == n else pa.array(rows, pa.int64())
        hit_idx = pa.array(hits.astype(np.int64, copy=False), pa.int64())
        off = pa.array(offsets.astype(np.int32, copy=False), pa.int32())
        matches = pa.ListArray.from_arrays(off, ids.take(hit_idx))
        owner_l = pa.ListArray.from_arrays(off, owners.take(hit_idx))
        text = (_pick(batch.column("text"), take_rows) if "text" in names
                else pa.nulls(len(rows), pa.string()))
        parts.append(pa.RecordBatch.from_arrays([
            _pick(batch.column("source"), take_rows),
            _pick(batch.column("event"), take_rows),
            _pick(types, take_rows).cast(pa.string()),
            matches,
            owner_l,
            pa.array(np.full(len(rows), plan.version, dtype=np.int64)),
            text,
        ], schema=MATCHED_SCHEMA))
    if not parts:
        return _empty()
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts, schema=MATCHED_SCHEMA).combine_chunks().to_batches()[0]


def _empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([], f.type) for f in MATCHED_SCHEMA], schema=MATCHED_SCHEMA)


def iter_matched(plan_value: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` body: ``plan_value`` is the broadcast :class:`MatchPlan`."""
    plan: MatchPlan = plan_value
    for b in batches:
        if b.num_rows:
            yield match_batch(plan, b)


def build_plan(schema: Schema | str, profiles: Sequence[Profile], *, engine: str = "index",
               matcher: Matcher | None = None) -> MatchPlan:
    """The plan of ``matcher`` (a live matcher that streaming keeps and updates), or of a
    new matcher of ``engine`` holding ``profiles``.

    Raises ``ValueError`` for an engine without the ``snapshot`` capability.
    """
    schema_text = schema if isinstance(schema, str) else schema.to_toml()
    if matcher is None:
        matcher = new_matcher(engine)
        add_profiles(matcher, profiles)
    assert isinstance(matcher, Snapshotting)
    return MatchPlan(schema_text, matcher.snapshot())


def new_matcher(name: str = "index") -> Matcher:
    """An empty matcher of an engine the stage can run (``ValueError`` names them)."""
    return engine(name, needs=Capability.SNAPSHOT).make()


def add_profiles(matcher: Matcher, profiles: Sequence[Profile]) -> None:
    """Add ``profiles``: in one bulk step per event type when the engine can."""
    if not isinstance(matcher, BulkLoading):
        for p in profiles:
            matcher.add(p)
        return
    by_type: dict[str, list[Profile]] = {}
    for p in profiles:
        by_type.setdefault(p.type_name, []).append(p)
    for group in by_type.values():
        matcher.add_columns(ProfileColumns.from_profiles(group[0].etype, group))


def index_available() -> bool:
    """Whether the registry has an ``index`` engine the stage can run."""
    return "index" in engine_names()


def engine_names() -> tuple[str, ...]:
    """The engines the stage can run: those with snapshots."""
    return names(Capability.SNAPSHOT)


def plan_matches(plan: MatchPlan, events: Sequence[Event]) -> list[list[str]]:
    """Match events on the driver with the stage's own code (for tests and small inputs)."""
    layouts = layouts_for(plan.schema_text)
    rows: list[tuple[str, list[int], list[str]]] = []
    for ev in events:
        ik, sk = layouts[ev.etype.name].split(ev.keys)
        rows.append((ev.etype.name, ik, sk))
    batch = pa.RecordBatch.from_arrays([
        pa.array(["<events>"] * len(rows), pa.string()),
        pa.array(range(len(rows)), pa.int64()),
        pa.array([r[0] for r in rows], pa.string()),
        pa.array([r[1] for r in rows], pa.list_(pa.int64())),
        pa.array([r[2] for r in rows], pa.list_(pa.string())),
    ], names=["source", "event", "type", "ikeys", "skeys"])
    out = match_batch(plan, batch) if rows else _empty()
    got: dict[int, list[str]] = dict(zip(out.column("event").to_pylist(),
                                         out.column("matches").to_pylist(), strict=True))
    return [got[i] for i in range(len(rows))]


def snapshot_summary(plan: MatchPlan) -> Mapping[str, int]:
    """Profile count and version, for progress displays."""
    return {"profiles": len(plan.snapshot), "version": plan.version}


__all__ = [
    "MATCHED_DDL",
    "MATCHED_SCHEMA",
    "MatchPlan",
    "add_profiles",
    "build_plan",
    "engine_names",
    "index_available",
    "iter_matched",
    "match_batch",
    "match_parts",
    "new_matcher",
    "plan_matches",
    "snapshot_summary",
]
