"""The matching kernels: one interface, two implementations, chosen at run time.

The index and counting matchers do their inner loops through :class:`Kernels`:

* :mod:`siftbus.match.kernel_numba`: compiled with numba (cached on disk after the first
  run), for real workloads;
* :mod:`siftbus.match.kernel_python`: numpy and plain Python, the same results; no
  compilation and no numba import, so a process that matches a handful of events starts
  in a fraction of the time.

``SIFTBUS_KERNELS`` chooses (read at the first use in a process):

``auto`` (default)
    the Python kernels until they have spent :data:`AUTO_BUDGET` seconds of CPU time or
    are given a batch of more than :data:`AUTO_ROWS` events, then numba for the rest of
    the process (a ski-rental rule: small jobs never pay for loading numba, large ones
    pay at most about that budget extra);
``numba``
    always numba;
``python``
    always the Python kernels (no numba import at all).

Tests run the conformance suite on both (:func:`use` switches in-process).

Loading numba takes about a second with its on-disk cache and 10-20 s of compilation
without it (a new installation, changed sources): a server must not do that in the
middle of serving. A server calls :func:`load_later` (the broker does at start): when the
``auto`` rule then wants numba, :func:`load_in_background` loads it in a thread and runs
the server's warm-up there, on that thread's own kernels, while the Python kernels go on
serving; the process switches when it is done, and the ``auto`` rule never loads numba
in the serving thread meanwhile. A server that never matches much never loads numba
(about 120 MB).

Array layout of the PrimAS index (built by :func:`siftbus.match.index.compile_type`):

``cells``      int32[E, m]   cell of each event's value, per attribute position
``cell_base``  int64[m + 1]  first global cell of each attribute (and the total)
``set_kind``   int32[cells]  per global cell: its lead set is bitmap row ``k >= 0``, or
                             (``-1``) the slice ``set_off[g]:set_off[g+1]`` of ``ent``
``ent``        int16|int32[N, 8]  lead-set entries, per global cell sorted by slot:
                             two pre-checks ``(attribute, first cell, width)`` (the hulls
                             of the member's next two most selective conditions, tested
                             before touching its own data), then the offset of the
                             member's record in ``rec`` as two 16-bit halves; bit 15 of
                             column 7 is set when the pre-checks are not exact and the
                             member's runs must be checked
``slot_pre``   [n, 6]        the same pre-checks by slot, for members of bitmap lead sets
``bitmaps``    uint64[rows, words]  bitmap lead sets
``rec_off``    int32[n + 1]  offset of each slot's record in ``rec`` (and its length)
``rec``        int16|int32[] one record per slot, in slot order: :data:`REC_HEAD`
                             elements (rank as two 16-bit halves, run count), then its
                             conditions as runs ``(attribute, first cell, last cell)``,
                             attributes in evaluation order. A candidate's rank and runs
                             share its record: one cache line where three arrays (run
                             offsets, runs, ranks) took three
``always``     int32[]       slots of profiles with no condition
``alive``      uint8[n]      tombstones by rank (0 = removed); empty = all alive

A profile's lead set is the one of its most selective condition; every profile has one
lead attribute, so the per-lead results are disjoint.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

# the record layout's helpers, with the numpy kernels that read records the same way
from siftbus.match.kernel_python import REC_HEAD as REC_HEAD
from siftbus.match.kernel_python import record_ranks as record_ranks
from siftbus.match.kernel_python import record_runs as record_runs

ENV = "SIFTBUS_KERNELS"
"""The environment variable that chooses the kernels: ``auto``, ``numba`` or ``python``."""

CHOICES = ("auto", "numba", "python")

AUTO_BUDGET = 0.25
"""CPU seconds the Python kernels may spend in ``auto`` mode before numba is loaded."""

AUTO_ROWS = 64
"""In ``auto`` mode a batch of more events than this goes to numba at once: one such call
could overrun the budget many times before the rule above sees it."""

_BATCH_KERNELS = frozenset({"index_match", "index_match_grouped", "counting_match",
                            "wide_match"})


IndexArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                    np.ndarray, np.ndarray, np.ndarray]
"""``(cell_base, set_kind, set_off, ent, slot_pre, bitmaps, rec_off, rec, always)``:
the index arrays in the order every ``index_*`` kernel takes them."""


class Kernels(Protocol):
    """What an implementation of the kernels provides (both are modules)."""

    def index_match(self, cells: np.ndarray, cell_base: np.ndarray, set_kind: np.ndarray,
                    set_off: np.ndarray, ent: np.ndarray, slot_pre: np.ndarray,
                    bitmaps: np.ndarray, rec_off: np.ndarray, rec: np.ndarray,
                    always: np.ndarray,
                    alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PrimAS matching of a batch of cell rows; returns CSR ``(offsets, ranks)``,
        each row's ranks sorted."""

    def index_match_grouped(self, cells: np.ndarray, cell_base: np.ndarray,
                            set_kind: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
                            slot_pre: np.ndarray, bitmaps: np.ndarray, rec_off: np.ndarray,
                            rec: np.ndarray, always: np.ndarray,
                            alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`index_match` for large batches, same result: per attribute the events
        are grouped by cell and each lead set is streamed once per group and tested
        against every event of the group (a blocked nested-loop join)."""

    def index_match_one(self, cells: np.ndarray, cell_base: np.ndarray,
                        set_kind: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
                        slot_pre: np.ndarray, bitmaps: np.ndarray, rec_off: np.ndarray,
                        rec: np.ndarray, always: np.ndarray,
                        alive: np.ndarray, out: np.ndarray) -> int:
        """One event (``cells`` int32[1, m]): its sorted ranks go to ``out[:count]``.

        Returns the count; a count above ``len(out)`` means ``out`` was too small (call
        again with a larger one). Allocates nothing: the per-event path."""

    def index_match_keys(self, keys: np.ndarray, bounds: np.ndarray, lut: np.ndarray,
                         lut_off: np.ndarray, row: np.ndarray, cell_base: np.ndarray,
                         set_kind: np.ndarray, set_off: np.ndarray, ent: np.ndarray,
                         slot_pre: np.ndarray, bitmaps: np.ndarray, rec_off: np.ndarray,
                         rec: np.ndarray, always: np.ndarray,
                         alive: np.ndarray, out: np.ndarray) -> int:
        """:meth:`index_match_one` from the event's int64 keys of an all-ordered type:
        the cells are written to ``row`` (int32[1, m]). Attribute ``a`` with a key ->
        cell table (``lut[lut_off[a]:lut_off[a + 1]]``, int32, indexed by key minus the
        domain's smallest key, ``bounds[cell_base[a]]``) reads its cell there; the others
        (an empty table) search ``bounds`` (int64, the cells' lower bounds in global
        cell order)."""

    def index_match_packed(self, i64: np.ndarray, i32: np.ndarray, ent: np.ndarray,
                           slot_pre: np.ndarray, bitmaps: np.ndarray, rec: np.ndarray,
                           alive: np.ndarray, out: np.ndarray, addrs: np.ndarray) -> int:
        """:meth:`index_match_keys` with its small and same-typed arrays packed into two
        (:func:`pack_keys_arrays`; the event's keys go to ``i64[KEYS_AT:KEYS_AT + m]``):
        9 arguments instead of 17, as each array argument costs ~30 ns to unbox on every
        call of the per-event path. ``addrs`` (int64, by rank; empty: none) are the
        addresses of the id strings the caller will return, and ``i64[IDS_AT]`` the
        address of the item array of the tuple holding them: the compiled kernel asks
        for their cache lines as it finds each match (prefetch instructions only)."""

    def specialise(self, name: str, args: tuple[Any, ...]) -> Callable[..., Any]:
        """Kernel ``name`` for arguments of exactly the types of ``args``: numba's
        compiled entry point (no type dispatch per call; a caller must then always pass
        arguments of those types, dtypes and layouts), the plain function in Python."""

    def fill_lead(self, first: np.ndarray, last: np.ndarray, slots: np.ndarray,
                  entry: np.ndarray, row_of_cell: np.ndarray, list_off: np.ndarray,
                  ent: np.ndarray, bitmaps: np.ndarray) -> None:
        """Run ``i`` puts ``entry[i]`` into the list of each cell ``first[i]..last[i]``
        (lists start at ``list_off``), or ``slots[i]``'s bit into the cell's bitmap row
        (``row_of_cell >= 0``). Runs come in slot order, so every list is sorted. Plain
        member lists (the counting matcher's) are ``entry = slots[:, None]`` into
        ``ent = mem[:, None]``."""

    def wide_match(self, cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray,
                   ncell: np.ndarray, rej: np.ndarray, lo_off: np.ndarray, lo: np.ndarray,
                   hi_off: np.ndarray, hi: np.ndarray, wrank: np.ndarray, wrec: np.ndarray,
                   rec: np.ndarray, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The wide profiles (:class:`siftbus.match.wide.WideIndex`, whose ``args()``
        come after ``cells``) each cell row matches: CSR ``(offsets, ranks)``, rows
        sorted. Per attribute the rejection bitset of the event's bucket is OR-ed and
        the bucket's endpoints outside the event's cell marked; every unmarked profile
        matches, after its runs in ``rec`` are checked when its record word is odd."""

    def wide_match_one(self, cells: np.ndarray, nb: np.ndarray, wrow: np.ndarray,
                       ncell: np.ndarray, rej: np.ndarray, lo_off: np.ndarray,
                       lo: np.ndarray, hi_off: np.ndarray, hi: np.ndarray,
                       wrank: np.ndarray, wrec: np.ndarray, rec: np.ndarray,
                       alive: np.ndarray, out: np.ndarray) -> int:
        """:meth:`wide_match` of one row (``cells`` int32[1, m]) into ``out``, with
        :meth:`index_match_one`'s count contract."""

    def merge_rows(self, off1: np.ndarray, r1: np.ndarray, off2: np.ndarray,
                   r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Two CSRs over the same events, rows sorted and disjoint, as one."""

    def delta_match(self, keys: np.ndarray, n: int, off: np.ndarray, attr: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray, alive: np.ndarray,
                    out: np.ndarray) -> int:
        """The profiles of a :class:`~siftbus.match.delta.Delta` one event satisfies:
        profile ``j < n`` has the rows ``off[j]:off[j + 1]`` of ``(attr, lo, hi)``, a
        profile's rows of one attribute adjacent; it matches when it is alive and each
        of its attributes has a row with ``lo <= keys[attr] <= hi``. Its slots go to
        ``out[:count]`` in order, with :meth:`index_match_one`'s count contract."""

    def counting_match(self, cells: np.ndarray, node_base: np.ndarray, af_off: np.ndarray,
                       af_mem: np.ndarray, pr_off: np.ndarray, pr_mem: np.ndarray,
                       ncond: np.ndarray, always: np.ndarray,
                       alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Siena's counting algorithm over a batch; returns CSR ``(offsets, slots)``.

        ``node_base[a, L]``: the first global block of level ``L`` of attribute ``a``
        (``-1`` past its last level; an event's cell ``c`` lies in block ``c >> L``);
        ``af_off/af_mem``: CSR over global blocks, the attribute filters (distinct
        per-attribute constraints) every cell of the block satisfies; ``pr_off/pr_mem``: CSR over
        filters, the profiles containing each; ``ncond``: conditions per profile. A
        profile matches when as many of its filters as it has conditions are satisfied."""


KEYS_AT = 8
"""Where the event's keys go in the ``i64`` array of :func:`pack_keys_arrays` (after a
header of 8: attributes, cells, profiles, always, table entries, ``rec_off`` entries,
:data:`IDS_AT`, :data:`SCRATCH`)."""

IDS_AT = 6
"""Where the address of the ids tuple's item array goes in the ``i64`` array (for the
prefetch of :meth:`Kernels.index_match_packed`; 0 when there is none)."""

SCRATCH = 768
"""int64 elements at the end of the ``i64`` array of :func:`pack_keys_arrays` that the
compiled per-event kernel uses as scratch (``kernel_event_numba.SCRATCH``, the same
number: a test checks), so that a call allocates nothing."""


def pack_keys_arrays(bounds: np.ndarray, lut: np.ndarray, lut_off: np.ndarray,
                     cell_base: np.ndarray, set_kind: np.ndarray, set_off: np.ndarray,
                     rec_off: np.ndarray, has_bitmaps: bool, always: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(i64, i32)`` for :meth:`Kernels.index_match_packed`: copies of the arrays of
    :meth:`Kernels.index_match_keys` but ``ent``, ``slot_pre``, ``bitmaps``, ``rec``,
    concatenated by type:

    ``i64``: header (m, cells, n, len(always), len(lut), len(rec_off) copied, 0 (see
    :data:`IDS_AT`), :data:`SCRATCH`), keys (m, written per event), ``lut_off`` (m + 1),
    ``cell_base`` (m + 1), ``bounds`` (cells), ``set_off`` (cells + 1), ``rec_off``
    (n + 1, only when the level has bitmap lead sets or profiles without conditions:
    list entries point at records directly), scratch (:data:`SCRATCH`);
    ``i32``: the cell row (m, scratch), ``lut``, ``set_kind`` (cells), ``always``.

    The copies cost nothing per profile without bitmaps and conditionless profiles, else 8
    bytes per profile beside the index's ~190.
    """
    m = len(cell_base) - 1
    n = len(rec_off) - 1
    ro = rec_off if has_bitmaps or len(always) else np.zeros(0, np.int64)
    header = np.array([m, len(set_kind), n, len(always), len(lut), len(ro), 0, SCRATCH],
                      np.int64)
    i64 = np.concatenate([header, np.zeros(m, np.int64), lut_off, cell_base, bounds,
                          set_off, ro, np.zeros(SCRATCH, np.int64)]).astype(np.int64)
    i32 = np.concatenate([np.zeros(m, np.int32), lut, set_kind, always]).astype(np.int32)
    return i64, i32


class _State:
    mode: str | None = None
    impl: Kernels | None = None
    spent = 0.0
    loading = 0
    """The :func:`use` generation a background load (:func:`load_in_background`) runs
    for, 0 when none runs; :func:`use` starts a new generation."""
    generation = 0
    later: Callable[[], object] | None = None
    """The warm-up of :func:`load_later` (``None``: the ``auto`` rule loads numba itself)."""


_STATE = _State()

_THREAD = threading.local()
"""A background load's own choice (``impl``): its warm-up runs numba while every other
thread keeps :attr:`_State.impl`."""

STATE = _STATE
"""The current choice, for per-event hot paths that cannot afford a call of
:func:`active` per event: ``STATE.impl`` is what :func:`active` returns (``None`` before
the first use: call :func:`active` then). Read only."""


def _numba() -> Kernels:
    from siftbus.match import kernel_numba

    return kernel_numba


def _python() -> Kernels:
    from siftbus.match import kernel_python

    return kernel_python


def use(mode: str | None = None) -> str:
    """Choose the kernels for this process (``None``: from ``SIFTBUS_KERNELS``, default
    ``auto``); returns the mode. Raises ``ValueError`` for an unknown mode."""
    chosen = mode if mode is not None else (os.environ.get(ENV) or "auto").strip().lower()
    if chosen not in CHOICES:
        raise ValueError(f"{ENV}={chosen!r}: choose one of {', '.join(CHOICES)}")
    _STATE.mode = chosen
    _STATE.spent = 0.0
    _STATE.generation += 1
    _STATE.loading = 0
    _STATE.later = None
    _STATE.impl = _numba() if chosen == "numba" else _Metered(_python()) \
        if chosen == "auto" else _python()
    return chosen


def active() -> Kernels:
    """The kernels to call now."""
    own = getattr(_THREAD, "impl", None)
    if own is not None:
        return own
    if _STATE.impl is None:
        use()
    assert _STATE.impl is not None
    return _STATE.impl


AUTO_BYTES = 1 << 18
"""In ``auto`` mode, input files larger than this are scanned by the compiled scanners
(:mod:`siftbus.match.scan_numba`), and the kernels switch to numba with them."""


def compiled_for(size: int) -> bool:
    """Whether a job of ``size`` bytes of input should run compiled (numba) code: always
    with ``numba``, never with ``python``, with ``auto`` when the process already does or
    the input is larger than :data:`AUTO_BYTES` (then the kernels switch to numba too)."""
    impl = active()
    if not isinstance(impl, _Metered):
        return impl is not _python()
    if _STATE.mode != "auto" or size <= AUTO_BYTES:
        return False
    _STATE.impl = _numba_or(impl)
    return _STATE.impl is not impl


def name() -> str:
    """``numba`` or ``python``: what :func:`active` returns now."""
    impl = active()
    return "python" if isinstance(impl, _Metered) or impl is _python() else "numba"


def _numba_or(fallback: Any) -> Any:
    if fallback is _STATE.impl and (_STATE.loading or _STATE.later is not None):
        if not _STATE.loading:  # the load goes to a thread; this one keeps serving
            load_in_background(_STATE.later)  # type: ignore[arg-type]
        return fallback
    try:
        return _numba()
    except (ImportError, OSError):  # numba missing or broken (or no address space left
        # for LLVM under a tight RLIMIT_AS): stay on the Python kernels
        return fallback


def load_later(warm: Callable[[], object]) -> None:
    """For a server in ``auto`` mode: when numba is wanted, load it in the background
    (:func:`load_in_background` with ``warm``) instead of in the calling thread. Until
    the next :func:`use`."""
    active()
    _STATE.later = warm


def load_in_background(warm: Callable[[], object]) -> threading.Thread | None:
    """In ``auto`` mode on the Python kernels: load numba in a daemon thread, call
    ``warm()`` there with that thread on numba (it should match a little of everything
    the process will match, so that the kernels it needs are compiled or loaded from the
    cache there), then switch the process to numba. Until then the Python kernels serve
    and the ``auto`` rule waits instead of loading numba itself. ``None`` when there is
    nothing to load (numba already, ``python`` or ``numba`` mode, a load running). If
    loading or ``warm`` fails, the process stays on the Python kernels (and the ``auto``
    rule may try again)."""
    metered = active()
    if not isinstance(metered, _Metered) or _STATE.mode != "auto" or _STATE.loading:
        return None
    generation = _STATE.loading = _STATE.generation

    def run() -> None:
        ready = None
        try:
            _THREAD.impl = _numba()
            warm()
            ready = _THREAD.impl
        except Exception:  # numba missing or broken, or a bug in warm(): keep Python
            pass
        finally:
            _THREAD.impl = None
            if _STATE.generation == generation:
                _STATE.loading = 0
                if ready is None:
                    _STATE.later = None  # not again and again: the auto rule as before
                elif _STATE.impl is metered:
                    _STATE.impl = ready

    thread = threading.Thread(target=run, name="siftbus-kernels", daemon=True)
    thread.start()
    return thread


class _Metered:
    """The Python kernels, timing every call; past :data:`AUTO_BUDGET` seconds the process
    switches to numba (results are the same, only the speed changes)."""

    def __init__(self, impl: Kernels) -> None:
        self._impl = impl

    def specialise(self, name: str, args: tuple[Any, ...]) -> Callable[..., Any]:
        """The timed kernel (the types of ``args`` do not matter here)."""
        return getattr(self, name)

    def __getattr__(self, attr: str) -> Any:
        fn = getattr(self._impl, attr)
        batch = attr in _BATCH_KERNELS

        def timed(*args: Any) -> Any:
            if batch and len(args[0]) > AUTO_ROWS and _STATE.impl is self:
                _STATE.impl = _numba_or(self)
                if _STATE.impl is not self:
                    return getattr(_STATE.impl, attr)(*args)
            t0 = time.process_time()
            try:
                return fn(*args)
            finally:
                _STATE.spent += time.process_time() - t0
                if _STATE.spent > AUTO_BUDGET and _STATE.impl is self:
                    _STATE.impl = _numba_or(self)

        return timed
