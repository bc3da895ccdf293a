"""The match stage: keyed Arrow batches in, CSR matches out, inside ``mapInArrow``.

The driver compiles the subscription set once per version into a picklable snapshot and
broadcasts it; each executor runs :func:`match_batch` on its Arrow batches. Two engines sit
behind one small interface:

* ``index``: :class:`siftbus.match.index.CompiledIndex`, whose batch kernel takes columns
  and returns CSR arrays (offsets, profile indices) without a Python object per match;
* ``reference``: rebuilds each :class:`~siftbus.model.Event` and asks
  :class:`~siftbus.match.ReferenceMatcher`; slow, kept for differential tests.

Output rows (one per event, also when nothing matches)::

    source string, event long, type string, matches array<string>, owners array<string>,
    version long, text string

``matches`` holds profile ids sorted by code point (the order ``siftbus match`` prints);
``owners[i]`` is the subscriber of ``matches[i]`` (or the profile id when it has none).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from siftbus.model import Event, Profile, Schema
from siftbus.spark.parse import TypeLayout, layouts_for, schema_from_text

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

ENGINES = ("index", "reference")
"""Engines the match stage can run (``index`` is the default)."""


class ColumnMatcher(Protocol):
    """What the match stage needs of a compiled subscription set."""

    @property
    def version(self) -> int:
        """Bumps on every change of the subscription set."""

    @property
    def profile_ids(self) -> Sequence[str]:
        """Profile id of each index the kernel returns."""

    @property
    def owners(self) -> Sequence[str]:
        """Subscriber (or id) of each index."""

    def match_keyed(self, layout: TypeLayout, ikeys: np.ndarray, skeys: Sequence[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Match ``n`` events of one type: ``ikeys`` (n, k) int64, one str array per string
        attribute. Returns CSR ``(offsets int64 (n+1), profile indices int32)``."""


@dataclass(frozen=True, slots=True)
class ReferenceSnapshot:
    """The oracle path: every profile of the type against every rebuilt event."""

    schema_text: str
    profiles: tuple[Profile, ...]
    version: int

    @property
    def profile_ids(self) -> Sequence[str]:
        return [p.id for p in self.profiles]

    @property
    def owners(self) -> Sequence[str]:
        return [p.owner for p in self.profiles]

    def match_keyed(self, layout: TypeLayout, ikeys: np.ndarray, skeys: Sequence[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
        schema = schema_from_text(self.schema_text)
        etype = schema[layout.name]
        mine = [(i, p) for i, p in enumerate(self.profiles) if p.type_name == layout.name]
        n = ikeys.shape[0]
        offsets = np.zeros(n + 1, dtype=np.int64)
        hits: list[int] = []
        for r in range(n):
            keys = layout.join(ikeys[r].tolist(), [s[r] for s in skeys])
            ev = Event(etype, keys)
            hits.extend(i for i, p in mine if p.matches(ev))
            offsets[r + 1] = len(hits)
        return offsets, np.asarray(hits, dtype=np.int32)


@dataclass(frozen=True, slots=True)
class IndexSnapshot:
    """Adapter from :class:`siftbus.match.index.CompiledIndex` to :class:`ColumnMatcher`."""

    compiled: Any

    #: CompiledIndex returns each row's profiles in code-point order of their ids already
    #: (one type per row, dense indices sorted by id within a type).
    rows_sorted = True

    @property
    def version(self) -> int:
        return int(self.compiled.version)

    @property
    def profile_ids(self) -> Sequence[str]:
        return list(self.compiled.profile_ids)

    @property
    def owners(self) -> Sequence[str]:
        return list(self.compiled.owners)

    def match_keyed(self, layout: TypeLayout, ikeys: np.ndarray, skeys: Sequence[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
        columns: dict[str, np.ndarray] = {}
        for j, name in enumerate(layout.ordered):
            columns[name] = np.ascontiguousarray(ikeys[:, j])
        for j, name in enumerate(layout.strings):
            columns[name] = skeys[j]
        csr = self.compiled.match_columns(layout.name, columns)
        return (np.asarray(csr.offsets, dtype=np.int64),
                np.asarray(csr.profiles, dtype=np.int32))


@dataclass(slots=True)
class MatchPlan:
    """What executors receive (broadcast): the compiled set and the schema it is for."""

    schema_text: str
    matcher: ColumnMatcher
    _ids: pa.Array | None = field(default=None, repr=False)
    _owners: pa.Array | None = field(default=None, repr=False)
    _rank: np.ndarray | None = field(default=None, repr=False)

    def __getstate__(self) -> tuple[str, ColumnMatcher]:
        return self.schema_text, self.matcher

    def __setstate__(self, state: tuple[str, ColumnMatcher]) -> None:
        self.schema_text, self.matcher = state
        self._ids = self._owners = self._rank = None

    @property
    def version(self) -> int:
        return self.matcher.version

    def derived(self) -> tuple[pa.Array, pa.Array, np.ndarray]:
        """Arrow arrays of ids and owners, and each index's rank in code-point order."""
        if self._ids is None or self._owners is None or self._rank is None:
            ids = list(self.matcher.profile_ids)
            self._ids = pa.array(ids, pa.string())
            self._owners = pa.array(list(self.matcher.owners), pa.string())
            order = sorted(range(len(ids)), key=ids.__getitem__)
            rank = np.empty(len(ids), dtype=np.int64)
            rank[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
            self._rank = rank
        return self._ids, self._owners, self._rank


def _sorted_csr(offsets: np.ndarray, hits: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Reorder each row's hits by profile-id rank (CSR offsets stay the same)."""
    if len(hits) < 2:
        return hits
    n = len(offsets) - 1
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    key = rows * (len(rank) + 1) + rank[hits]
    return hits[np.argsort(key, kind="stable")]


def _pick(col: pa.Array, rows: pa.Array | None) -> pa.Array:
    """``col`` gathered at ``rows`` (``None``: all of it, no copy)."""
    return col if rows is None else col.take(rows)


def _column_numpy(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def match_batch(plan: MatchPlan, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Match one keyed batch; rows come out grouped by type, each with its sorted matches."""
    layouts = layouts_for(plan.schema_text)
    ids, owners, rank = plan.derived()
    names = batch.schema.names
    n = batch.num_rows
    types = batch.column("type")
    if n == 0:
        return _empty()
    enc = types.dictionary_encode() if not isinstance(types, pa.DictionaryArray) else types
    codes = enc.indices.to_numpy(zero_copy_only=False)
    dict_names = enc.dictionary.to_pylist()
    parts: list[pa.RecordBatch] = []
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
        else:
            # One type per batch is the common case: then the columns need no gather.
            whole = len(rows) == n
            take = pa.array(rows, pa.int64())
            ik = batch.column("ikeys") if whole else batch.column("ikeys").take(take)
            k = len(layout.ordered)
            flat = _column_numpy(ik.flatten()).astype(np.int64, copy=False)
            ikeys = flat.reshape(len(rows), k) if k else np.zeros((len(rows), 0), np.int64)
            skeys: list[np.ndarray] = []
            if layout.strings:
                sk_col = batch.column("skeys") if whole else batch.column("skeys").take(take)
                sk = _column_numpy(sk_col.flatten())
                s = sk.reshape(len(rows), len(layout.strings))
                skeys = [s[:, j] for j in range(len(layout.strings))]
            offsets, hits = plan.matcher.match_keyed(layout, ikeys, skeys)
            if not getattr(plan.matcher, "rows_sorted", False):
                hits = _sorted_csr(offsets, hits, rank)
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
               version: int = 1, matcher: Any = None) -> MatchPlan:
    """Compile ``profiles`` for the match stage.

    ``engine="index"`` uses ``matcher.snapshot()`` when a live
    :class:`~siftbus.match.index.IndexMatcher` is given (streaming keeps one and updates it),
    else builds one from ``profiles``.
    """
    schema_text = schema if isinstance(schema, str) else schema.to_toml()
    if engine == "reference":
        return MatchPlan(schema_text, ReferenceSnapshot(schema_text, tuple(profiles), version))
    if engine == "index":
        if matcher is None:
            matcher = new_index_matcher()
            for p in profiles:
                matcher.add(p)
        return MatchPlan(schema_text, IndexSnapshot(matcher.snapshot()))
    raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def new_index_matcher() -> Any:
    """A new empty :class:`siftbus.match.index.IndexMatcher` (imported late: it compiles)."""
    from siftbus.match.index import IndexMatcher

    return IndexMatcher()


def index_available() -> bool:
    """Whether the indexed engine is installed (the reference engine always is)."""
    try:
        from siftbus.match import index

        return hasattr(index, "IndexMatcher")
    except ImportError:
        return False


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
    return {"profiles": len(plan.matcher.profile_ids), "version": plan.version}


__all__ = [
    "ENGINES",
    "MATCHED_DDL",
    "MATCHED_SCHEMA",
    "ColumnMatcher",
    "IndexSnapshot",
    "MatchPlan",
    "ReferenceSnapshot",
    "build_plan",
    "index_available",
    "iter_matched",
    "match_batch",
    "new_index_matcher",
    "plan_matches",
    "snapshot_summary",
]
