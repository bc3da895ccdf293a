"""``add_all``: every profile added, and no full collection of the cyclic collector
started meanwhile (a bulk add builds only long-lived objects)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

from siftbus.lang import parse_profile
from siftbus.match import ReferenceMatcher, add_all
from siftbus.model import Event, EventType, Profile

T = EventType.of("T", a="int[0,99]")


def test_add_all_adds_every_profile_with_full_collections_put_off() -> None:
    profiles = [parse_profile(f"p{i}: T(a = {i % 100})", T) for i in range(600)]
    inside = [False]
    full: list[bool] = []  # for each full collection: did it start inside add_all?

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(inside[0])

    kept: list[list[int]] = []

    def given() -> Iterator[Profile]:
        inside[0] = True
        for i, p in enumerate(profiles):
            kept.extend([i] for _ in range(20))  # long-lived objects, as adds make
            yield p

    m = ReferenceMatcher()
    old = gc.get_threshold()
    gc.freeze()  # the test process's heap set aside: a full collection is due when the
    gc.collect()  # long-lived objects grow by a quarter, so a small test can reach one
    gc.callbacks.append(watch)
    gc.set_threshold(5, 1, 1)  # a full collection every few allocations, if allowed
    try:
        add_all(m, given())
        inside[0] = False
        assert gc.get_threshold() == (5, 1, 1)  # set back at the end
    finally:
        inside[0] = False
        gc.set_threshold(*old)
        gc.callbacks.remove(watch)
        gc.unfreeze()
    assert True not in full
    assert m.match(Event.of(T, {"a": 7})) == sorted(f"p{i}" for i in range(600) if i % 100 == 7)
