"""The per-event path's prefetch of the id strings: it never reads what it is given,
and a matcher that uses it answers exactly as the reference does, whichever kernels
the process runs and however they change (the property over random long lead lists,
removals and re-adds with the prefetch on or off is
``test_index.test_per_event_path_on_long_lead_lists``)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from siftbus.match import kernel, level
from siftbus.match.index import IndexMatcher
from siftbus.match.prefetch_numba import compiled_prefetch, prefetch_ids

from .test_index import _long_list_event, long_list_matchers


@pytest.fixture
def prefetch_every_level(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Levels of any size prefetch (in a server: from ``PREFETCH_FROM`` profiles)."""
    monkeypatch.setattr(level, "PREFETCH_FROM", 1)
    try:
        yield
    finally:
        kernel.use()


def test_addresses_are_only_prefetched_never_read() -> None:
    """Null, odd, kernel-space and unmapped addresses: prefetches never fault."""
    ids = tuple(f"p{i}" for i in range(1000))
    real = np.fromiter(map(id, ids), np.int64, len(ids))
    ranks = np.array([0, 999, 5, 5, 17], np.int32)
    for addrs, slots in [(real, id(ids) + tuple.__basicsize__),
                         (np.zeros(1000, np.int64), 0),
                         (np.full(1000, -1, np.int64), 1),
                         (np.full(1000, 0x7FFF_FFFF_FFFF, np.int64), -(1 << 62)),
                         (np.random.default_rng(3).integers(-(1 << 62), 1 << 62, 1000), 12345)]:
        assert prefetch_ids(ranks, len(ranks), addrs, slots) == len(ranks)
        entry = compiled_prefetch(ranks, addrs)
        assert entry is not None and entry(ranks, 3, addrs, slots) == 3


def _levels(m: IndexMatcher) -> list[level.Level]:
    return [lv for ts in m._types.values() for lv in ts.levels]


@pytest.mark.usefixtures("prefetch_every_level")
def test_the_prefetch_follows_the_kernel_choice() -> None:
    """Chosen under numba kernels only, again after every change of choice; the same
    matches as the reference throughout, with removals between the steps."""
    rnd = random.Random(11)
    m, ref = long_list_matchers(rnd, 500)
    evs = [_long_list_event(rnd) for _ in range(30)]
    for step, mode in enumerate(["python", "numba", "python", "numba", "auto"]):
        kernel.use(mode)
        assert [m.match(e) for e in evs] == ref.match_batch(evs), mode
        used = [lv.prefetching() for lv in _levels(m) if lv.id_list is not None]
        assert used and all(u == (kernel.name() == "numba") for u in used), mode
        pid = f"p{step * 41:03d}"
        m.remove(pid)
        ref.remove(pid)
