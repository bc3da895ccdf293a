"""Python's cyclic garbage collector paused while a bulk load builds objects.

Loading profiles in bulk (a broker's store at a restart, a profile file made into
:class:`~siftbus.model.Profile` objects, the covering table filled in one step) makes
hundreds of thousands of long-lived objects without cycles; each full collection on the
way scans every one made so far again. At 100,000 stored profiles that was 60% of making
the profiles and a quarter of a broker's restart (``bench/ingest.py``, ``restart``).
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
