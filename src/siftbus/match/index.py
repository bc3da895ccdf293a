"""The PrimAS interval index (Bittner 2003, §4.1), with the DAS extensions.

Per event type and per attribute, the boundary points of all conditions cut the domain
into elementary *cells* (:mod:`siftbus.match.cells`); every condition accepts whole
cells. For each cell the index keeps the set of profiles whose condition on that
attribute the cell satisfies (PrimAS' ``Arr~``). Profiles that leave an attribute free
are not copied into its cells: they form one *unconstrained* set per attribute.

Matching intersects, attribute by attribute, "satisfied here ∪ unconstrained". Starting
from *all* profiles would make every step touch most of them, so each profile gets a
*lead* attribute: its most selective condition. The candidates for lead attribute ``a``
are the lead profiles in the event's cell of ``a`` (small); they are intersected with
the sets of every other attribute in evaluation order (most selective first) and the
loop stops as soon as the candidate set is empty. Every profile is a candidate of
exactly one lead, so the union over leads is exact.

Profile sets are sorted ``int32`` slot arrays or bitmaps, chosen per set by fill ratio
(``bitmap_threshold``, Bittner's break-even 1/32 by default: a reference costs 32 bits,
a mark one bit). Lead sets are always lists, because they are enumerated.

The compiled form (:class:`CompiledType`, :class:`CompiledIndex`) is immutable and
picklable; :class:`IndexMatcher` adds and removes profiles through levels and
tombstones (:mod:`siftbus.match.leveled`) without rebuilding the whole index, and
re-derives the evaluation order and the leads from observed statistics in
:meth:`IndexMatcher.optimize`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from siftbus.errors import DomainError
from siftbus.match import kernel
from siftbus.match.base import positions_by_type
from siftbus.match.cells import (
    AttributeCells,
    Pieces,
    column_cells,
    event_cells,
    events_to_columns,
    layout,
)
from siftbus.match.leveled import LeveledMatcher, TypeState
from siftbus.model import Event, EventType, Profile

__all__ = [
    "CompiledIndex",
    "CompiledType",
    "EventModel",
    "IndexMatcher",
    "IndexStats",
    "MatchCSR",
    "compile_type",
    "events_to_columns",
]

DEFAULT_BITMAP_THRESHOLD = 1 / 32
_ID = attrgetter("id")
_SUBSCRIBER = attrgetter("subscriber")


@dataclass(frozen=True, slots=True)
class MatchCSR:
    """Matches of a batch as compressed sparse rows.

    Event ``i`` matched the profiles ``profiles[offsets[i]:offsets[i+1]]`` (dense indices
    into ``CompiledIndex.profile_ids``), in plain string order of their ids.
    """

    offsets: np.ndarray
    """int64, one more entry than events; ``offsets[0] == 0``."""
    profiles: np.ndarray
    """int32 dense profile indices."""

    @property
    def n_events(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_matches(self) -> int:
        return int(self.offsets[-1])

    def rows(self, profile_ids: Sequence[str] | np.ndarray) -> list[list[str]]:
        """The ids matched by each event, as lists of ``str``."""
        ids = profile_ids
        off = self.offsets.tolist()
        sl = self.profiles.tolist()
        return [[str(ids[s]) for s in sl[off[i]:off[i + 1]]] for i in range(len(off) - 1)]


@dataclass(frozen=True, slots=True)
class EventModel:
    """Observed event keys of one type, used to estimate how selective conditions are."""

    samples: tuple[tuple[Any, ...], ...]
    """Key tuples of sample events, in schema order."""

    def cell_weights(self, ac: AttributeCells) -> np.ndarray:
        """Probability of each cell: 90% the sample frequency, 10% uniform (no zeros)."""
        uniform = _uniform_weights(ac)
        if not self.samples:
            return uniform
        col = [s[ac.position] for s in self.samples]
        cells = ac.cells_of(np.array(col, dtype=np.int64) if ac.ordered else
                            np.array(col, dtype=object))
        freq = np.bincount(cells, minlength=ac.n_cells).astype(np.float64) / len(col)
        return 0.9 * freq + 0.1 * uniform


def _uniform_weights(ac: AttributeCells) -> np.ndarray:
    if ac.ordered:
        widths = np.diff(np.append(ac.bounds, ac.max_key + 1)).astype(np.float64)
        return widths / (ac.max_key - ac.min_key + 1)
    return np.full(ac.n_cells, 1.0 / max(1, ac.n_cells))


@dataclass(frozen=True, slots=True)
class CompiledType:
    """The immutable PrimAS index of one event type over a fixed list of profiles.

    Profiles have a *rank* (position in plain string order of their ids; ``ids`` is in
    rank order) and an internal *slot* (clustered by lead attribute and cell). Arrays are
    laid out for :func:`siftbus.match.kernel.index_match`, which documents them.
    """

    type_name: str
    """Event type."""
    cells: tuple[AttributeCells, ...]
    """Cells of every attribute, in schema order."""
    order: np.ndarray
    """int32 evaluation order: attribute positions, most selective first."""
    cell_base: np.ndarray
    """int64 first global cell of each attribute."""
    set_kind: np.ndarray
    """int32 per cell: bitmap row of its lead set, or -1 for a list slice."""
    set_off: np.ndarray
    """int64 CSR offsets over cells into ``set_mem``."""
    set_mem: np.ndarray
    """int32 slots of the list lead sets, sorted per cell."""
    set_pre: np.ndarray
    """``[N, 3 * PRECHECKS]`` aligned with ``set_mem``: per pre-check the attribute, first
    cell and width of the hull of the member's next most selective conditions (int16
    when every cell number fits, else int32)."""
    slot_pre: np.ndarray
    """``[n, 3 * PRECHECKS]`` the same pre-checks by slot (for bitmap lead sets)."""
    bitmaps: np.ndarray
    """uint64 ``[rows, words]`` bitmap lead sets."""
    cond_off: np.ndarray
    """int64 CSR offsets over slots into the condition runs."""
    runs: np.ndarray
    """int32 ``[R, 3]`` non-lead condition runs: attribute, first cell, last cell
    (profile-major, attributes in evaluation order)."""
    rank: np.ndarray
    """int32 rank of each slot."""
    slot_of_rank: np.ndarray
    """int32 slot of each rank."""
    always: np.ndarray
    """int32 slots of the profiles without any condition."""
    lead: np.ndarray
    """int16 lead attribute of each rank (-1: none)."""
    ids: np.ndarray
    """Profile ids by rank (numpy str array)."""
    owners: np.ndarray
    """Subscriber (or id) by rank, aligned with ``ids``."""
    threshold: float
    """Fill ratio above which a lead set is a bitmap."""

    @property
    def n(self) -> int:
        return len(self.ids)

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Match cell rows; returns CSR ``(offsets, ranks)``. ``alive`` is by slot."""
        grouped = use_grouped(len(cells), self.n)
        fn = kernel.index_match_grouped if grouped else kernel.index_match
        return fn(cells, self.cell_base, self.set_kind, self.set_off, self.set_mem,
                  self.set_pre, self.slot_pre, self.bitmaps, self.cond_off, self.runs,
                  self.rank, self.always, _NO_TOMBSTONES if alive is None else alive)

    def run_one(self, cells: np.ndarray, alive: np.ndarray | None, out: np.ndarray) -> int:
        """Match one cell row (int32[1, m]) into ``out``; see ``kernel.index_match_one``."""
        return int(kernel.index_match_one(cells, self.cell_base, self.set_kind, self.set_off,
                                          self.set_mem, self.set_pre, self.slot_pre, self.bitmaps,
                                          self.cond_off, self.runs, self.rank, self.always,
                                          _NO_TOMBSTONES if alive is None else alive, out))

    def slot(self, rank: int) -> int:
        return int(self.slot_of_rank[rank])

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        return np.sort(self.rank[alive.astype(bool)])

    def nbytes(self) -> int:
        """Bytes held by the index arrays (ids and owners excluded)."""
        return sum(a.nbytes for a in (self.order, self.cell_base, self.set_kind, self.set_off,
                                      self.set_mem, self.set_pre, self.slot_pre, self.bitmaps,
                                      self.cond_off, self.runs, self.rank,
                                      self.slot_of_rank, self.always, self.lead))


_NO_TOMBSTONES = np.zeros(0, np.uint8)


def compile_type(etype: EventType, profiles: Sequence[Profile], *,
                 threshold: float = DEFAULT_BITMAP_THRESHOLD,
                 model: EventModel | None = None,
                 order: Sequence[str] | None = None) -> CompiledType:
    """Build the index of ``profiles`` (all of type ``etype``, sorted by id).

    ``model`` weights cells by observed events (uniform over the domain otherwise);
    ``order`` forces an evaluation order (attribute names; the rest follow by position).
    """
    if not 0 <= threshold <= 1:
        raise ValueError(f"bitmap_threshold must be in [0, 1], got {threshold}")
    n = len(profiles)
    cells, pieces = layout(etype, profiles)  # piece slots are ranks here
    m = len(cells)
    weights = [model.cell_weights(ac) if model is not None else _uniform_weights(ac)
               for ac in cells]
    # Selectivity of each (attribute, profile) condition: the probability that an event
    # satisfies it; 2.0 marks "unconstrained" (never a lead, passes always).
    cov = np.full((max(m, 1), n), 2.0, np.float32)
    for a, pc in enumerate(pieces):
        if len(pc.slots):
            cum = np.concatenate([[0.0], np.cumsum(weights[a])])
            contrib = cum[pc.last.astype(np.int64) + 1] - cum[pc.first]
            total = np.bincount(pc.slots, weights=contrib, minlength=n)
            constrained = np.zeros(n, bool)
            constrained[pc.slots] = True
            cov[a, constrained] = total[constrained]
    if m and n:
        lead = np.argmin(cov, axis=0).astype(np.int16)
        lead[cov.min(axis=0) > 1.5] = -1
    else:
        lead = np.full(n, -1, np.int16)
    pre = _prechecks(cov, lead, pieces, n, m)
    if order is not None:
        names = [ac.name for ac in cells]
        unknown = [a for a in order if a not in names]
        if unknown:
            raise DomainError(f"{etype.name} has no attribute(s) {', '.join(unknown)}",
                              field=unknown[0])
        ordered = [names.index(a) for a in order]
        ordered += [i for i in range(m) if i not in ordered]
        eval_order = np.array(ordered, np.int32)
    else:
        pass_rate = np.where(cov[:m] > 1.5, 1.0, cov[:m]).mean(axis=1) if n else np.ones(m)
        eval_order = np.argsort(pass_rate, kind="stable").astype(np.int32)
    attr_rank = np.empty(max(m, 1), np.int64)
    attr_rank[eval_order] = np.arange(m)

    # Slots: cluster profiles by lead attribute and first lead cell, so that one cell's
    # candidates are neighbours in memory (their runs are read one after another).
    lead_first = np.zeros(n, np.int64)
    for a, pc in enumerate(pieces):
        sel = lead[pc.slots] == a
        if sel.any():
            lf = np.full(n, np.iinfo(np.int64).max, np.int64)
            np.minimum.at(lf, pc.slots[sel], pc.first[sel].astype(np.int64))
            mine = lead == a
            lead_first[mine] = lf[mine]
    lead_key = np.where(lead < 0, m, lead).astype(np.int64)
    rank = np.lexsort((np.arange(n), lead_first, lead_key)).astype(np.int32)  # slot -> rank
    slot_of_rank = np.empty(n, np.int32)
    slot_of_rank[rank] = np.arange(n, dtype=np.int32)

    n_cells = np.array([ac.n_cells for ac in cells], np.int64)
    cell_base = (np.concatenate([[0], np.cumsum(n_cells)[:-1]]).astype(np.int64) if m
                 else np.zeros(0, np.int64))
    total_cells = int(n_cells.sum())
    lead_pieces: list[Pieces] = []
    counts = np.zeros(total_cells, np.int64)
    run_slot: list[np.ndarray] = []
    run_attr: list[np.ndarray] = []
    run_first: list[np.ndarray] = []
    run_last: list[np.ndarray] = []
    for a, pc in enumerate(pieces):
        slots = slot_of_rank[pc.slots]
        is_lead = lead[pc.slots] == a
        by_slot = np.argsort(slots[is_lead], kind="stable")
        lp = Pieces(slots[is_lead][by_slot], pc.first[is_lead][by_slot],
                    pc.last[is_lead][by_slot])
        lead_pieces.append(lp)
        base = int(cell_base[a])
        nc = cells[a].n_cells
        counts[base:base + nc] = _run_counts(lp, nc)
        rest = ~is_lead
        run_slot.append(slots[rest])
        run_attr.append(np.full(int(rest.sum()), a, np.int16))
        run_first.append(pc.first[rest])
        run_last.append(pc.last[rest])
    limit = threshold * n
    dense = (counts > 0) & (counts > limit) if threshold < 1 else np.zeros(total_cells, bool)
    set_kind = np.full(total_cells, -1, np.int32)
    set_kind[dense] = np.arange(int(dense.sum()), dtype=np.int32)
    set_off = np.concatenate([[0], np.cumsum(np.where(dense, 0, counts))]).astype(np.int64)
    small = total_cells < 32767 and m < 32767
    pre_dtype = np.int16 if small else np.int32
    pre = np.minimum(pre, np.iinfo(pre_dtype).max).astype(pre_dtype)
    set_mem = np.empty(int(set_off[-1]), np.int32)
    set_pre = np.empty((int(set_off[-1]), 3 * PRECHECKS), pre_dtype)
    bitmaps = np.zeros((int(dense.sum()), max(1, (n + 63) // 64)), np.uint64)
    for a, lp in enumerate(lead_pieces):
        base = int(cell_base[a])
        nc = cells[a].n_cells
        kernel.fill_lead(lp.first, lp.last, lp.slots, pre[rank[lp.slots]],
                         set_kind[base:base + nc], set_off[base:base + nc + 1], set_mem,
                         set_pre, bitmaps)

    # Non-lead runs, profile-major, attributes in evaluation order.
    rs = np.concatenate(run_slot) if run_slot else np.zeros(0, np.int32)
    ra = np.concatenate(run_attr) if run_attr else np.zeros(0, np.int16)
    rf = np.concatenate(run_first) if run_first else np.zeros(0, np.int32)
    rl = np.concatenate(run_last) if run_last else np.zeros(0, np.int32)
    by = np.lexsort((rf, attr_rank[ra.astype(np.int64)] if len(ra) else ra, rs))
    cond_off = np.concatenate([[0], np.cumsum(np.bincount(rs, minlength=n))]).astype(np.int64)
    ids = np.array(list(map(_ID, profiles)), dtype=str) if n else np.zeros(0, "U1")
    subscribers = list(map(_SUBSCRIBER, profiles))
    owners = (np.array([s or p.id for s, p in zip(subscribers, profiles, strict=True)],
                       dtype=str) if any(subscribers) else ids)
    always = np.sort(slot_of_rank[lead < 0]).astype(np.int32)
    return CompiledType(etype.name, tuple(cells), eval_order, cell_base, set_kind, set_off,
                        set_mem, set_pre, np.ascontiguousarray(pre[rank]), bitmaps, cond_off,
                        np.ascontiguousarray(np.stack([ra[by], rf[by], rl[by]], axis=1),
                                             dtype=np.int32), rank, slot_of_rank,
                        always, lead, ids, owners, threshold)


PRECHECKS = 2
"""How many further conditions each lead-set entry carries (as cell hulls)."""

GROUPED_MIN = 256
"""Batches at least this large may be matched grouped by cell (``index_match_grouped``)."""

GROUPED_MIN_PROFILES = 25_000
"""...and only against at least this many profiles of the type: grouping pays for its sort
when each event's candidate sets are long. Measured on the standard workload with 65,536-row
batches (CPU time): the per-event kernel is 3x faster at 1,000 profiles and 1.8x at 10,000;
the grouped one 1.1x faster at 30,000, 1.7x at 60,000, 1.85x at 100,000."""


def use_grouped(rows: int, profiles: int) -> bool:
    """Whether a batch of ``rows`` events against ``profiles`` profiles takes the grouped
    kernel (both kernels return the same CSR)."""
    return rows >= GROUPED_MIN and profiles >= GROUPED_MIN_PROFILES


def _prechecks(cov: np.ndarray, lead: np.ndarray, pieces: Sequence[Pieces], n: int,
               m: int) -> np.ndarray:
    """int32 ``[n, 3 * PRECHECKS]`` by rank: per pre-check the attribute, the first cell
    of the hull of the profile's runs there and the hull's width (last - first).

    The pre-checks are the profile's next most selective conditions after its lead; a
    profile with fewer conditions repeats its lead attribute with an all-accepting hull.
    """
    out = np.zeros((n, 3 * PRECHECKS), np.int32)
    big = np.iinfo(np.int32).max
    rest = cov.copy()
    if m and n:
        rest[lead.clip(0), np.arange(n)] = 2.0
    for j in range(PRECHECKS):
        col = 3 * j
        if m and n:
            attr = np.argmin(rest, axis=0).astype(np.int32)
            none = rest.min(axis=0) > 1.5
            rest[attr, np.arange(n)] = 2.0
        else:
            attr = np.zeros(n, np.int32)
            none = np.ones(n, bool)
        out[:, col] = np.where(none, lead.clip(0), attr)
        out[:, col + 1] = 0
        out[:, col + 2] = big
        for a, pc in enumerate(pieces):
            sel = (attr[pc.slots] == a) & ~none[pc.slots]
            if sel.any():
                lo = np.full(n, big, np.int32)
                hi = np.full(n, -1, np.int32)
                np.minimum.at(lo, pc.slots[sel], pc.first[sel])
                np.maximum.at(hi, pc.slots[sel], pc.last[sel])
                mine = (attr == a) & ~none
                out[mine, col + 1] = lo[mine]
                out[mine, col + 2] = hi[mine] - lo[mine]
    return out


def _run_counts(pc: Pieces, n_cells: int) -> np.ndarray:
    """How many runs cover each cell (a difference array, no per-cell loop)."""
    if not len(pc.slots):
        return np.zeros(n_cells, np.int64)
    diff = np.bincount(pc.first, minlength=n_cells + 1)
    diff -= np.bincount(pc.last.astype(np.int64) + 1, minlength=n_cells + 1)
    return np.cumsum(diff)[:n_cells].astype(np.int64)


@dataclass(frozen=True, slots=True)
class CompiledIndex:
    """An immutable, picklable snapshot of an index over all event types.

    Profiles have dense indices ``0..len(profile_ids)-1``: type by type, and inside a
    type in plain string order of their ids.
    """

    version: int
    """The matcher version this snapshot was taken at."""
    types: Mapping[str, CompiledType]
    """Per event type."""
    type_offset: Mapping[str, int]
    """Dense index of each type's first profile."""
    profile_ids: np.ndarray
    """Profile id by dense index."""
    owners: np.ndarray
    """Subscriber (or profile id) by dense index."""

    def match_columns(self, type_name: str, columns: Any) -> MatchCSR:
        """Match columnar events of one type (dict of key arrays or a pyarrow RecordBatch).

        Ordered attributes give int64 domain keys, strings give str values; extra columns
        are ignored. Raises :class:`DomainError` on a missing column or a bad key.
        """
        ct = self.types.get(type_name)
        if ct is None:
            return MatchCSR(np.zeros(_n_rows(columns) + 1, np.int64), np.zeros(0, np.int32))
        cells = column_cells(ct.cells, columns, _n_rows(columns))
        offsets, slots = ct.run(cells)
        return MatchCSR(offsets, slots + np.int32(self.type_offset[type_name]))

    def match(self, event: Event) -> list[str]:
        """Ids of the profiles ``event`` satisfies, sorted."""
        ct = self.types.get(event.type_name)
        if ct is None:
            return []
        _, slots = ct.run(np.array([event_cells(ct.cells, event)], np.int32))
        ids = ct.ids
        return [str(ids[s]) for s in slots.tolist()]

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        """``[match(e) for e in events]``, one kernel call per event type."""
        out: list[list[str]] = [[] for _ in events]
        for tname, idx in positions_by_type(events).items():
            ct = self.types.get(tname)
            if ct is None:
                continue
            group = [events[i] for i in idx]
            csr = self.match_columns(tname, events_to_columns(group[0].etype, group))
            for i, row in zip(idx, csr.rows(self.profile_ids), strict=True):
                out[i] = row
        return out

    def __len__(self) -> int:
        return len(self.profile_ids)


def _n_rows(columns: Any) -> int:
    if hasattr(columns, "num_rows"):
        return int(columns.num_rows)
    for v in columns.values():
        return len(v)
    return 0


@dataclass(frozen=True, slots=True)
class IndexStats:
    """Shape of an :class:`IndexMatcher` (for dashboards and the benchmark)."""

    profiles: int
    """Registered profiles."""
    pending: int
    """Profiles added since the last compile (matched one by one)."""
    levels: int
    """Compiled levels over all types."""
    tombstones: int
    """Removed profiles still occupying a slot."""
    cells: int
    """Elementary cells over all attributes and levels."""
    list_sets: int
    """Profile sets stored as sorted slot arrays."""
    bitmap_sets: int
    """Profile sets stored as bitmaps."""
    index_bytes: int
    """Bytes held by the compiled arrays."""
    order: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Evaluation order per event type (of its largest level)."""


class IndexMatcher(LeveledMatcher):
    """A dynamic PrimAS interval index behind the :class:`~siftbus.match.Matcher` protocol.

    ``bitmap_threshold`` is the fill ratio above which a profile set is a bitmap (0: all
    bitmaps, 1: all lists). ``pending_limit`` profiles added since the last compile are
    matched one by one before they are compiled into a level.

    Like the other matchers it is not safe to mutate from one thread while another
    matches; concurrent readers should share a :meth:`snapshot` (immutable).
    """

    def __init__(self, bitmap_threshold: float = DEFAULT_BITMAP_THRESHOLD, *,
                 pending_limit: int = 16) -> None:
        if not 0 <= bitmap_threshold <= 1:
            raise ValueError(f"bitmap_threshold must be in [0, 1], got {bitmap_threshold}")
        super().__init__(pending_limit=pending_limit)
        self.bitmap_threshold = bitmap_threshold
        self._models: dict[str, EventModel] = {}
        self._orders: dict[str, tuple[str, ...]] = {}
        self._snapshot: CompiledIndex | None = None

    def _compile(self, etype: EventType, profiles: Sequence[Profile]) -> CompiledType:
        return compile_type(etype, profiles, threshold=self.bitmap_threshold,
                            model=self._models.get(etype.name),
                            order=self._orders.get(etype.name))

    def optimize(self, events: Sequence[Event] | None = None, *,
                 order: Mapping[str, Sequence[str]] | None = None) -> None:
        """Re-derive the evaluation order and the lead attributes from statistics.

        With ``events``, cells are weighted by how often those events fall in them;
        without, by the events matched so far (a sample of them), or uniformly over the
        domain when there are none. ``order`` forces an attribute order per type instead
        (``{type: [attr, ...]}``). Recompiles every type into a single level.
        """
        samples: dict[str, list[tuple[Any, ...]]] = {}
        if events is not None:
            for e in events:
                samples.setdefault(e.type_name, []).append(e.keys)
        else:
            for name, ts in self._types.items():
                samples[name] = list(ts.observed)
        self._models = {name: EventModel(tuple(s)) for name, s in samples.items() if s}
        if order is not None:
            self._orders = {t: tuple(attrs) for t, attrs in order.items()}
        else:
            self._orders = {}
        self._recompile_all()

    def snapshot(self) -> CompiledIndex:
        """An immutable, picklable index of every profile at the current version."""
        snap = self._snapshot
        if snap is not None and snap.version == self._version:
            return snap
        types: dict[str, CompiledType] = {}
        offsets: dict[str, int] = {}
        ids: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        at = 0
        for name, ts in self._types.items():
            self._settle(ts)
            profiles = self._type_profiles(ts)
            if not profiles:
                continue
            only = ts.levels[0] if len(ts.levels) == 1 and not ts.pending else None
            if only is not None and only.live == len(only.profiles):
                ct = only.compiled
            else:
                ct = self._compile(ts.etype, profiles)
            types[name] = ct
            offsets[name] = at
            at += ct.n
            ids.append(ct.ids)
            owners.append(ct.owners)
        snap = CompiledIndex(self._version, types, offsets,
                             np.concatenate(ids) if ids else np.zeros(0, "U1"),
                             np.concatenate(owners) if owners else np.zeros(0, "U1"))
        self._snapshot = snap
        return snap

    def match_columns(self, type_name: str, columns: Any) -> MatchCSR:
        """:meth:`CompiledIndex.match_columns` on the current snapshot."""
        return self.snapshot().match_columns(type_name, columns)

    def stats(self) -> IndexStats:
        levels = [lv for ts in self._types.values() for lv in ts.levels]
        order: dict[str, tuple[str, ...]] = {}
        for name, ts in self._types.items():
            if ts.levels:
                ct = ts.levels[0].compiled
                order[name] = tuple(ct.cells[i].name for i in ct.order.tolist())
        return IndexStats(
            profiles=len(self),
            pending=sum(len(ts.pending) for ts in self._types.values()),
            levels=len(levels),
            tombstones=sum(len(lv.profiles) - lv.live for lv in levels),
            cells=sum(int(lv.compiled.set_kind.shape[0]) for lv in levels),
            list_sets=sum(int((lv.compiled.set_kind < 0).sum()) for lv in levels),
            bitmap_sets=sum(int((lv.compiled.set_kind >= 0).sum()) for lv in levels),
            index_bytes=sum(lv.compiled.nbytes() for lv in levels),
            order=order,
        )

    def evaluation_order(self, type_name: str) -> tuple[str, ...]:
        """Attribute evaluation order of a type (compiling pending profiles first)."""
        ts: TypeState | None = self._types.get(type_name)
        if ts is None:
            return ()
        self._settle(ts)
        if not ts.levels:
            return ()
        ct = ts.levels[0].compiled
        return tuple(ct.cells[i].name for i in ct.order.tolist())
