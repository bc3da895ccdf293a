"""The channel's clock: time as ``TimeBase::TimeT`` (100 ns units since 1582-10-15).

Every time the channel keeps (StartTime, StopTime, Timeout, expiry, pacing) is a TimeT
read from :func:`timet_now`. ETCL's ``$curtime`` is the same time scale
(:func:`siftbus.lang.etcl.timet_from_unix_ns`).
"""

from __future__ import annotations

import time

from siftbus.lang.etcl import TIMET_UNIX_OFFSET, timet_from_unix_ns


def timet_now() -> int:
    """The current time as ``TimeBase::TimeT`` (100 ns units since 1582-10-15)."""
    return timet_from_unix_ns(time.time_ns())


__all__ = ["TIMET_UNIX_OFFSET", "timet_now"]
