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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from siftbus.match import budget as memory_budget
from siftbus.match import index_event, kernel
from siftbus.match.base import MatchCSR, positions_by_type
from siftbus.match.cells import (
    AttributeCells,
    column_cells,
    event_cells,
    events_to_columns,
    n_rows,
)
from siftbus.match.columns import ProfileColumns, make_profile, str_array
from siftbus.match.delta import rows_of
from siftbus.match.index_stats import IndexStats, index_stats
from siftbus.match.leveled import LeveledMatcher, TypeState, split_rows
from siftbus.match.primas import PRECHECKS, EventModel, build
from siftbus.match.wide import WideIndex
from siftbus.model import Event, EventType, Profile

__all__ = [
    "CompiledIndex",
    "CompiledType",
    "EventModel",
    "IndexMatcher",
    "IndexStats",
    "MatchCSR",
    "PRECHECKS",
    "compile_type",
    "events_to_columns",
]

DEFAULT_BITMAP_THRESHOLD = 1 / 32


@dataclass(frozen=True, slots=True)
class CompiledType:
    """The immutable PrimAS index of one event type over a fixed set of profiles.

    Profiles have a *rank* (position in plain string order of their ids; ``ids`` is in
    rank order) and an internal *slot* (clustered by lead attribute and cell). The arrays
    are laid out for :mod:`siftbus.match.kernel`, which documents them. They are also
    the only copy of the profiles' conditions: :meth:`columns` and :meth:`profile` read
    them back (string conditions are kept aside, in ``st_*``).
    """

    etype: EventType
    """Event type."""
    cells: tuple[AttributeCells, ...]
    """Cells of every attribute, in schema order."""
    order: np.ndarray
    """int32 evaluation order: attribute positions, most selective first."""
    cell_base: np.ndarray
    """int64 first global cell of each attribute, and the number of cells."""
    bounds: np.ndarray
    """int64 lower key bound of each global cell (0 for string cells)."""
    set_kind: np.ndarray
    """int32 per cell: bitmap row of its lead set, or -1 for a slice of ``set_ent``."""
    set_off: np.ndarray
    """int64 CSR offsets over cells into ``set_ent``."""
    set_ent: np.ndarray
    """``[N, 8]`` lead-set entries: pre-checks and slot (see :mod:`siftbus.match.kernel`);
    int16 when every cell number fits, else int32."""
    slot_pre: np.ndarray
    """``[n, 6]`` the pre-checks by slot (for bitmap lead sets; empty without bitmaps)."""
    bitmaps: np.ndarray
    """uint64 ``[rows, words]`` bitmap lead sets."""
    rec_off: np.ndarray
    """int32 offset of each slot's record in ``rec`` (and the total, < 2**31)."""
    rec: np.ndarray
    """One record per slot (see :mod:`siftbus.match.kernel`): rank, and every condition
    as runs of cells, attribute, first cell, last cell (attributes in evaluation
    order)."""
    slot_of_rank: np.ndarray
    """int32 slot of each rank."""
    always: np.ndarray
    """int32 slots of the profiles without any condition."""
    lead: np.ndarray
    """int16 lead attribute of each rank (-1: none)."""
    ids: np.ndarray
    """Profile ids by rank (numpy str array)."""
    sub_code: np.ndarray
    """int32 subscriber of each rank, an index into ``subscribers`` (0: none)."""
    subscribers: tuple[str, ...]
    """Distinct subscribers (``subscribers[0] == ""``)."""
    st_rank: np.ndarray
    """int32 rank of each string condition (sorted)."""
    st_attr: np.ndarray
    """int16 attribute of each string condition."""
    st_con: np.ndarray
    """The string constraints (object array)."""
    threshold: float
    """Fill ratio above which a lead set is a bitmap."""
    wide: WideIndex
    """The wide profiles (:mod:`siftbus.match.wide`): in no lead set, matched by
    rejection bitsets and sorted endpoints; their records are in ``rec`` like all."""

    @property
    def type_name(self) -> str:
        return self.etype.name

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def ordered_only(self) -> bool:
        """Every attribute is ordered: an event's cells can be found from its keys in the
        kernel (:meth:`run_keys`)."""
        return all(ac.ordered for ac in self.cells)

    @property
    def owners(self) -> np.ndarray:
        """Subscriber (or id) by rank."""
        if len(self.subscribers) == 1:
            return self.ids
        return np.where(self.sub_code == 0, self.ids, str_array(self.subscribers)[self.sub_code])

    def kernel_args(self) -> kernel.IndexArrays:
        """The index arrays in the order the kernels take them."""
        return (self.cell_base, self.set_kind, self.set_off, self.set_ent, self.slot_pre,
                self.bitmaps, self.rec_off, self.rec, self.always)

    def run(self, cells: np.ndarray, alive: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Match cell rows; returns CSR ``(offsets, ranks)``. ``alive`` is by rank."""
        kern = kernel.active()
        alive = _NO_TOMBSTONES if alive is None else alive
        wide = self.wide
        if wide.n == self.n:  # no lead sets, no conditionless profiles
            return kern.wide_match(cells, *wide.args(), self.rec, alive)
        fn = kern.index_match_grouped if use_grouped(len(cells), self.n - wide.n) \
            else kern.index_match
        offsets, ranks = fn(cells, *self.kernel_args(), alive)
        if not wide.n:
            return offsets, ranks
        w_off, w_ranks = kernel.active().wide_match(cells, *wide.args(), self.rec, alive)
        return kernel.active().merge_rows(offsets, ranks, w_off, w_ranks)

    def run_one(self, cells: np.ndarray, alive: np.ndarray | None, out: np.ndarray) -> int:
        """Match one cell row (int32[1, m]) into ``out``; see ``Kernels.index_match_one``."""
        alive = _NO_TOMBSTONES if alive is None else alive
        k = 0 if self.wide.n == self.n else \
            int(kernel.active().index_match_one(cells, *self.kernel_args(), alive, out))
        return index_event.add_wide(self, cells, alive, out, k)

    def event_runner(self) -> Callable[[Event, np.ndarray, np.ndarray], int]:
        """``run(event, alive, out) -> count``: one event's sorted ranks into ``out``
        (:func:`siftbus.match.index_event.event_runner`)."""
        return index_event.event_runner(self)

    def id_matcher(self, ids: tuple[str, ...], addrs: np.ndarray
                   ) -> Callable[[Event, np.ndarray], list[str]] | None:
        """``match(event, alive) -> ids``: the whole per-event path as one function, or
        ``None`` when this type has none (:func:`siftbus.match.index_event.id_matcher`)."""
        return index_event.id_matcher(self, ids, addrs)

    def key_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lut, lut_off)``: the key -> cell tables of the ordered attributes that have
        one, concatenated (int32), and CSR offsets over attributes (int64; an empty
        table: none). One load per attribute instead of a binary search over the cells'
        bounds, which missed the cache on most of its steps."""
        tables = [ac.table if ac.ordered and ac.table is not None else np.zeros(0, np.int32)
                  for ac in self.cells]
        lut_off = np.zeros(len(tables) + 1, np.int64)
        np.cumsum([len(t) for t in tables], out=lut_off[1:])
        lut = np.concatenate(tables).astype(np.int32) if tables else np.zeros(0, np.int32)
        return lut, lut_off

    @property
    def rank(self) -> np.ndarray:
        """int32 rank of each slot (read from the records; not kept twice)."""
        return kernel.record_ranks(self.rec, self.rec_off[:-1]).astype(np.int32)

    def slot(self, rank: int) -> int:
        """Where this rank's tombstone is in ``alive``: tombstones are by rank (the
        kernels read a candidate's rank from its record anyway)."""
        return rank

    def ranks_alive(self, alive: np.ndarray) -> np.ndarray:
        return np.flatnonzero(alive).astype(np.int32)

    def nbytes(self) -> int:
        """Bytes held by the index arrays (ids and string constraints excluded)."""
        return sum(a.nbytes for a in (self.order, self.cell_base, self.bounds, self.set_kind,
                                      self.set_off, self.set_ent, self.slot_pre, self.bitmaps,
                                      self.rec_off, self.rec, self.slot_of_rank,
                                      self.always, self.lead, self.sub_code)) \
            + self.wide.nbytes()

    # -- the profiles, read back from the index ----------------------------------------

    def _intervals(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """(slot, attribute, lo, hi) of the ordered runs of ``slots`` (int64)."""
        count, idx = kernel.record_runs(self.rec, self.rec_off[slots].astype(np.int64))
        slots = np.repeat(slots, count)
        attr = self.rec[idx].astype(np.int64)
        ordered = np.array([ac.ordered for ac in self.cells], bool)[attr] if len(attr) \
            else np.zeros(0, bool)
        attr, slots, idx = attr[ordered], slots[ordered], idx[ordered]
        f = self.rec[idx + 1].astype(np.int64)
        last = self.rec[idx + 2].astype(np.int64)
        base = self.cell_base[attr]
        lo = self.bounds[base + f]
        nxt = base + last + 1
        top = np.array([ac.max_key for ac in self.cells], np.int64)
        at_end = nxt >= self.cell_base[attr + 1]
        hi = np.where(at_end, top[attr], self.bounds[np.minimum(nxt, len(self.bounds) - 1)] - 1)
        return slots, attr, lo, hi

    def columns(self) -> ProfileColumns:
        """Every profile of this index as columns, in rank (id) order."""
        slots, attr, lo, hi = self._intervals(np.arange(self.n, dtype=np.int64))
        ranks = self.rank[slots].astype(np.int64)
        by = np.lexsort((lo, attr, ranks))
        return ProfileColumns(self.etype, self.ids, self.sub_code, self.subscribers,
                              ranks[by].astype(np.int32), attr[by].astype(np.int16), lo[by],
                              hi[by], self.st_rank, self.st_attr, self.st_con)

    def profile(self, rank: int) -> Profile:
        """The profile of this rank, made anew (equal to the one added)."""
        slot = int(self.slot_of_rank[rank])
        _, attr, lo, hi = self._intervals(np.array([slot], np.int64))
        by = np.lexsort((lo, attr))
        s0, s1 = np.searchsorted(self.st_rank, [rank, rank + 1])
        return make_profile(self.etype, str(self.ids[rank]),
                            self.subscribers[int(self.sub_code[rank])], attr[by].tolist(),
                            lo[by].tolist(), hi[by].tolist(), self.st_attr[s0:s1].tolist(),
                            list(self.st_con[s0:s1]))


_NO_TOMBSTONES = np.zeros(0, np.uint8)


def _conditions(profile: Profile) -> int:
    """Condition rows of a profile as columns hold them: one per interval (a set holds
    several) or string condition."""
    n = 0
    for c in profile.conditions:
        ivs = getattr(c.constraint, "intervals", None)
        n += 1 if ivs is None else len(ivs)
    return n


def compile_type(etype: EventType, profiles: Sequence[Profile] | ProfileColumns, *,
                 threshold: float = DEFAULT_BITMAP_THRESHOLD,
                 model: EventModel | None = None,
                 order: Sequence[str] | None = None) -> CompiledType:
    """Build the index of ``profiles`` (all of type ``etype``, sorted by id).

    ``model`` weights cells by observed events (uniform over the domain otherwise);
    ``order`` forces an evaluation order (attribute names; the rest follow by position).
    """
    cols = profiles if isinstance(profiles, ProfileColumns) else \
        ProfileColumns.from_profiles(etype, profiles)
    arrays = build(cols, threshold, model, order)
    return CompiledType(etype=etype, ids=cols.ids, sub_code=cols.sub_code,
                        subscribers=cols.subscribers, st_rank=cols.st_slot,
                        st_attr=cols.st_attr, st_con=cols.st_con, threshold=threshold,
                        **arrays)


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
            return MatchCSR(np.zeros(n_rows(columns) + 1, np.int64), np.zeros(0, np.int32))
        cells = column_cells(ct.cells, columns, n_rows(columns))
        offsets, slots = ct.run(cells)
        return MatchCSR(offsets, slots + np.int32(self.type_offset[type_name]))

    def match(self, event: Event) -> list[str]:
        """Ids of the profiles ``event`` satisfies, sorted."""
        ct = self.types.get(event.type_name)
        if ct is None:
            return []
        _, ranks = ct.run(np.array([event_cells(ct.cells, event)], np.int32))
        return ct.ids[ranks].tolist()

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        """``[match(e) for e in events]``, one kernel call per event type."""
        out: list[list[str]] = [[] for _ in events]
        for tname, idx in positions_by_type(events).items():
            ct = self.types.get(tname)
            if ct is None:
                continue
            group = [events[i] for i in idx]
            cells = column_cells(ct.cells, events_to_columns(ct.etype, group), len(group))
            offsets, ranks = ct.run(cells)
            for i, row in zip(idx, split_rows(ct.ids, offsets, ranks), strict=True):
                out[i] = row
        return out

    def __len__(self) -> int:
        return len(self.profile_ids)


class IndexMatcher(LeveledMatcher):
    """A dynamic PrimAS interval index behind the :class:`~siftbus.match.Matcher` protocol.

    ``bitmap_threshold`` is the fill ratio above which a profile set is a bitmap (0: all
    bitmaps, 1: all lists). Profiles added one at a time wait uncompiled until a
    level is compiled from them: up to ``delta_limit`` as flat rows matched by one kernel
    call (:mod:`siftbus.match.delta`; default :data:`~siftbus.match.leveled.DELTA_LIMIT`,
    0 when ``pending_limit`` is 0), of which at most ``pending_limit`` with string
    conditions or extended features, matched one by one.

    Like the other matchers it is not safe to mutate from one thread while another
    matches; concurrent readers should share a :meth:`snapshot` (immutable).
    """

    def __init__(self, bitmap_threshold: float = DEFAULT_BITMAP_THRESHOLD, *,
                 pending_limit: int = 16, delta_limit: int | None = None,
                 budget: int | Literal["default"] | None = "default") -> None:
        if not 0 <= bitmap_threshold <= 1:
            raise ValueError(f"bitmap_threshold must be in [0, 1], got {bitmap_threshold}")
        super().__init__(pending_limit=pending_limit, delta_limit=delta_limit)
        self.budget: int | None = memory_budget.default() if budget == "default" \
            else None if budget is None else int(budget)
        """Bytes the index may take (:mod:`siftbus.match.budget`; ``None``: no limit)."""
        self._held = 0  # estimated bytes of the profiles held (budget.cost)
        self.bitmap_threshold = bitmap_threshold
        self._models: dict[str, EventModel] = {}
        self._orders: dict[str, tuple[str, ...]] = {}
        self._snapshot: CompiledIndex | None = None

    def add(self, profile: Profile) -> None:
        """See :meth:`LeveledMatcher.add`; raises :class:`~siftbus.errors.CapacityError`
        (adding nothing) when the index would pass its memory budget."""
        ts = self._state(profile.etype)
        rows = rows_of(profile) if ts.delta is not None else None
        conds = len(rows) // 3 if rows is not None else _conditions(profile)
        need = memory_budget.PROFILE_BYTES + memory_budget.CONDITION_BYTES * conds
        if self.budget is not None and self._held + need > self.budget:
            raise memory_budget.refuse(self.budget, self._held, 1, conds)
        self._insert(profile, ts, rows)
        self._held += need

    def add_columns(self, cols: ProfileColumns, *, unregistered: bool = False) -> None:
        """See :meth:`LeveledMatcher.add_columns`; raises
        :class:`~siftbus.errors.CapacityError` (adding nothing) when the index would pass
        its memory budget."""
        conds = len(cols.iv_slot) + len(cols.st_slot)
        need = memory_budget.cost(len(cols), conds)
        if self.budget is not None and self._held + need > self.budget:
            raise memory_budget.refuse(self.budget, self._held, len(cols), conds)
        super().add_columns(cols, unregistered=unregistered)
        self._held += need

    def remove(self, profile_id: str) -> Profile:
        profile = super().remove(profile_id)
        self._held = max(0, self._held - memory_budget.cost(1, _conditions(profile)))
        return profile

    def _compile(self, cols: ProfileColumns) -> CompiledType:
        name = cols.etype.name
        return compile_type(cols.etype, cols, threshold=self.bitmap_threshold,
                            model=self._models.get(name), order=self._orders.get(name))

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
            only = ts.levels[0] if len(ts.levels) == 1 and not ts.pending else None
            if only is not None and only.live == only.size:
                ct = only.compiled
            else:
                cols = self._type_columns(ts)
                if cols is None:
                    continue
                ct = self._compile(cols)
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
        return index_stats(self._types, len(self))

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
