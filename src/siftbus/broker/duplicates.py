"""Duplicate suppression for sessions: the publication numbers a session has handled.

A row reaches a session twice when a handoff races the rows travelling toward the old
and the new access broker, or when a session publisher sends a row again after a broker
crash. :class:`Seen` remembers, per *stream* (one publisher's events of one type, whose
numbers reach a broker in order), the numbers handled within a window, exactly, so the
copy is dropped (see ``docs/mobility.md``, "Duplicates").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from siftbus.errors import WireError
from siftbus.wire.events import Block


def stream(etype: str, src: str) -> str:
    """The key of one publisher's events of one type: the unit whose publication numbers
    reach a broker in order (a batch of several types may travel as several frames)."""
    return f"{etype} {src}"


def _streams(block: Block) -> dict[str, np.ndarray]:
    """The rows of a block per stream: ``{stream: row indices}``."""
    t = block.etype.name
    if isinstance(block.src, str):
        return {stream(t, block.src): np.arange(len(block))}
    groups: dict[str, list[int]] = {}
    for i, src in enumerate(block.src):
        groups.setdefault(stream(t, src), []).append(i)
    return {k: np.array(v, np.int64) for k, v in groups.items()}


class Seen:
    """The publication numbers a session has handled lately, per stream.

    Exact within ``window`` seconds: a row whose number is in the set was handled
    (delivered, buffered or dropped over a limit) by this session, here or at a broker
    it came from. The new broker of a handoff drops the rows it received meanwhile that
    the old one had handled (a copy travelling toward each), and a session drops rows a
    session publisher sends twice (after a broker crash). Per stream the highest number
    is kept too, so the usual row -- newer than anything seen -- costs one comparison.
    """

    __slots__ = ("_arrays", "high")

    def __init__(self) -> None:
        self.high: dict[str, int] = {}
        self._arrays: dict[str, list[tuple[float, np.ndarray]]] = {}

    def __len__(self) -> int:
        return sum(len(a) for parts in self._arrays.values() for _, a in parts)

    def add(self, block: Block, now: float) -> None:
        for key, rows in _streams(block).items():
            seqs = block.seq[rows]
            if not len(seqs):
                continue
            self.high[key] = max(self.high.get(key, -1), int(seqs.max()))
            self._arrays.setdefault(key, []).append((now, np.asarray(seqs, np.int64)))

    def add_ranges(self, key: str, ranges: list[Any], now: float) -> None:
        seqs = np.concatenate([np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in ranges]) \
            if ranges else np.zeros(0, np.int64)
        if len(seqs):
            self.high[key] = max(self.high.get(key, -1), int(seqs.max()))
            self._arrays.setdefault(key, []).append((now, seqs))

    def merge(self, other: Seen, now: float) -> None:
        """Take in what ``other`` has seen (the old broker's memory, after a handoff)."""
        for key in other._arrays:
            a = other.known(key)
            if len(a):
                self.high[key] = max(self.high.get(key, -1), int(a.max()))
                self._arrays.setdefault(key, []).append((now, a))

    def known(self, key: str) -> np.ndarray:
        parts = self._arrays.get(key)
        if not parts:
            return np.zeros(0, np.int64)
        if len(parts) > 1:  # merge once; later lookups reuse it
            merged = np.unique(np.concatenate([a for _, a in parts]))
            parts[:] = [(max(t for t, _ in parts), merged)]
        return parts[0][1]

    def mask(self, block: Block, prefix: str | None = None) -> np.ndarray:
        """Which rows of ``block`` were seen (with ``prefix``, only rows whose source
        starts with it count: a session drops only its session publishers' repeats)."""
        out = np.zeros(len(block), bool)
        for key, rows in _streams(block).items():
            if prefix is not None and not key.split(" ", 1)[1].startswith(prefix):
                continue
            seqs = block.seq[rows]
            high = self.high.get(key)
            if high is None or not (seqs <= high).any():
                continue
            out[rows] = np.isin(seqs, self.known(key))
        return out

    def prune(self, now: float, window: float) -> None:
        """Forget what was seen more than ``window`` seconds ago."""
        cut = now - window
        for key in list(self._arrays):
            parts = [(t, a) for t, a in self._arrays[key] if t >= cut]
            if parts:
                self._arrays[key] = parts
            else:
                del self._arrays[key]
                self.high.pop(key, None)

    def to_wire(self) -> dict[str, list[list[int]]]:
        """``{stream: [[lo, hi], ...]}``: the numbers as ranges (a session matching most
        of a publisher's events gives one range per stream)."""
        out: dict[str, list[list[int]]] = {}
        for key in self._arrays:
            a = self.known(key)
            if not len(a):
                continue
            cut = np.flatnonzero(np.diff(a) != 1) + 1
            starts = np.concatenate(([0], cut))
            ends = np.concatenate((cut - 1, [len(a) - 1]))
            out[key] = [[int(a[i]), int(a[j])] for i, j in zip(starts, ends, strict=True)]
        return out

    @classmethod
    def from_wire(cls, data: Any, now: float) -> Seen:
        seen = cls()
        if not isinstance(data, dict):
            raise WireError("a session's seen numbers must be a map", field="seen")
        for key, ranges in data.items():
            if not isinstance(key, str) or not isinstance(ranges, list) or not all(
                    isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)
                    and r[0] <= r[1] and r[1] - r[0] < 1 << 24 for r in ranges):
                raise WireError("a session's seen numbers must be ranges [lo, hi]",
                                field="seen")
            seen.add_ranges(key, ranges, now)
        return seen




__all__ = ["Seen", "stream"]
