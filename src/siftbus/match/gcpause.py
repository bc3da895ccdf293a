"""Python's cyclic garbage collector paused while a bulk load builds objects.

Making profiles in bulk (a broker's store read at a restart, a profile file made into
:class:`~siftbus.model.Profile` objects) builds hundreds of thousands of long-lived
objects without cycles, and the collections on the way scan them again and again. At
100,000 stored profiles the pause took a broker's restart to its first match from 11.7
to 10.4 CPU-s (medians of 3, same run). Pausing the whole restart (the covering table
filled too) gained nothing: the collection it put off then ran at the first event. The
XML filter pauses it while its index is built (a document registered, the access table
compiled): a quarter of the loading time at 183,275 subscriptions, and two thirds of
the first compile's (:mod:`siftbus.xmlfilter.matcher`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, and on again at its end if it was on (by
    whichever call ends first, when several run at once or nest)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def full_collections_deferred() -> Iterator[None]:
    """No full collection starts during the block (young objects are still collected as
    usual; the one put off runs at the next full collection after it). For a step that
    makes millions of long-lived objects from a small heap, which would start one full
    collection every time the heap grew by a quarter: a broker's restart at 100,000
    stored profiles ran six, 1.8 of its 10.4 CPU-s; deferred, one of 0.9 s ran later.
    The thresholds are set back at the end (by whichever call ends first, when several
    run at once or nest)."""
    t0, t1, t2 = gc.get_threshold()
    gc.set_threshold(t0, t1, max(t2, 1 << 30))
    try:
        yield
    finally:
        gc.set_threshold(t0, t1, t2)


__all__ = ["collector_paused", "full_collections_deferred"]
