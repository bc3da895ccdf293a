"""Keys of any ordered domain as int64, for hull columns (numpy).

Open kinds have keys wider than int64 (``timestamp`` nanoseconds over years 1-9999, ``ip``
as 128 bits) and ``int`` spans all of int64, where a width ``hi - lo + 1`` computed in
int64 overflows. A :class:`KeySquash` maps one attribute's keys into int64 monotonically
(never decreasing): the identity when the domain fits, otherwise the offset from the
domain's least key shifted right. Hull tests use only ``<=`` and ``>=``, which a monotone
map preserves, so a filter on squashed hulls keeps every true candidate; where the map is
not the identity it may keep more, so an exact test must decide (``exact`` is false).
"""

from __future__ import annotations

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class KeySquash:
    """A monotone map of one attribute's keys ``[lo, hi]`` into int64."""

    __slots__ = ("exact", "lo", "shift")

    def __init__(self, lo: int, hi: int) -> None:
        self.exact = lo >= _I64_MIN and hi <= _I64_MAX
        """The map is the identity: hull tests on it are as exact as on the keys."""
        self.lo = lo
        self.shift = max(0, (hi - lo).bit_length() - 64)

    def __call__(self, key: int) -> int:
        if self.exact:
            return key
        return ((key - self.lo) >> self.shift) + _I64_MIN


__all__ = ["KeySquash"]
