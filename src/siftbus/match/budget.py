"""The index's memory budget: a profile set whose index would exceed it is refused.

Since wide conditions are kept linear (:mod:`siftbus.match.wide`), an index's size is
bounded by its profiles and conditions, whatever their widths and domains. A matcher
adds up an estimate as profiles come in, before it compiles anything:
:data:`PROFILE_BYTES` per profile and :data:`CONDITION_BYTES` per condition interval or
string condition (what compiling a level may hold at its peak: the kept index is
~60-75 bytes per condition, the build's temporaries as much again). When the total
would pass the budget, :class:`~siftbus.errors.CapacityError` names both and nothing
is added: a clear refusal instead of an out-of-memory kill.

The budget is ``SIFTBUS_INDEX_BUDGET`` (bytes, or with a ``K``, ``M``, ``G`` or ``T``
suffix; ``0`` or ``none``: no budget), else half of what the process may still take:
the smaller of the machine's memory and the address-space limit (``RLIMIT_AS``) less
what the process already maps, read when the matcher is made.
"""

from __future__ import annotations

import os
import resource

from siftbus.errors import CapacityError, ConfigError

ENV = "SIFTBUS_INDEX_BUDGET"
"""The environment variable that sets the budget."""

PROFILE_BYTES = 160
"""Estimated bytes per profile (ids, records' heads, per-profile arrays, build peak)."""

CONDITION_BYTES = 96
"""Estimated bytes per condition interval or string condition."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse(text: str) -> int | None:
    """Bytes of a budget text (``"512M"``), ``None`` for no budget; ConfigError if bad."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    if t in ("0", "NONE", ""):
        return None
    unit = t[-1] if t[-1] in _UNITS else ""
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        raise ConfigError(f"{ENV}={text!r}: expected bytes such as 512M or 2G",
                          field=ENV) from None
    if value <= 0:
        raise ConfigError(f"{ENV}={text!r}: the budget must be positive", field=ENV)
    return int(value * _UNITS[unit])


def default() -> int | None:
    """The budget for a new matcher (see the module text)."""
    env = os.environ.get(ENV)
    if env is not None:
        return parse(env)
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            mapped = 0
        room = min(room, soft - mapped)
    return max(room, 0) // 2


def cost(profiles: int, conditions: int) -> int:
    """Estimated bytes of an index over this many profiles and conditions."""
    return PROFILE_BYTES * profiles + CONDITION_BYTES * conditions


def size(n: float) -> str:
    """``n`` bytes for people: ``1.5 GB``, ``300 MB``."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def refuse(budget: int, held: int, profiles: int, conditions: int) -> CapacityError:
    """The error for adding ``profiles`` (with ``conditions``) to an index of ``held``."""
    need = held + cost(profiles, conditions)
    return CapacityError(
        f"the profile index would need about {size(need)} with {profiles:,} more "
        f"profile(s) ({conditions:,} conditions), over its memory budget of "
        f"{size(budget)}; set {ENV} to change the budget")
