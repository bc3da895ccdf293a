"""Python's cyclic garbage collector paused while a bulk load builds objects.

Making profiles in bulk (a broker's store read at a restart, a profile file made into
:class:`~siftbus.model.Profile` objects) builds hundreds of thousands of long-lived
objects without cycles, and the collections on the way scan them again and again. At
100,000 stored profiles the pause took a broker's restart to its first match from 11.7
to 10.4 CPU-s (medians of 3, same run). Pausing the whole restart (the covering table
filled too) gained nothing: the collection it put off then ran at the first event.
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


__all__ = ["collector_paused"]
