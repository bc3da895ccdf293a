"""Matching event blocks against a broker's table: which links and clients get which rows.

:class:`BatchMatch` maps every match of a block to the link its entry came from (a
neighbour broker or a local client) and the id the client knows, with numpy arrays
and without one Python object per event; the protocols (:mod:`.protocols`) group the
result by link.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.covering.table import Entry
from siftbus.match.base import Matcher, Snapshotting
from siftbus.wire.events import Block


@dataclass(slots=True)
class RouteResult:
    """Counts of one routing step (for instrumentation)."""

    filtered: int = 0
    matches: int = 0
    events_out: int = 0
    notifications: int = 0


class BatchMatch:
    """Matches whole event blocks against a routing table, without per-event objects.

    With the interval index it matches a block's columns on the matcher's immutable
    snapshot (one kernel call, a CSR result) and maps the snapshot's dense profile
    indices to links and client ids through arrays built once per snapshot. Compiling a
    snapshot costs about as much as matching thousands of events one level at a time, so
    after a table change the levelled ``match_batch`` serves until the events matched
    at the new version would have paid for a recompilation (a ski-rental rule: a table
    that changes constantly never pays for more than one compile per that many events).
    Other engines always take ``match_batch``. Both paths give the same matches.
    """

    def __init__(self, matcher: Matcher, entries: Mapping[str, Entry],
                 is_broker: Callable[[str], bool]) -> None:
        self.matcher = matcher
        self.entries = entries
        """The broker's table entries by gid (read when mapping matches to links)."""
        self._is_broker = is_broker
        self.links: list[str] = []
        self.codes: dict[str, int] = {}
        self.is_broker = np.zeros(0, bool)
        self._snap: Any = None
        self._dense_link = np.zeros(0, np.int32)
        self._dense_lid = np.zeros(0, object)
        self._stale_version = -1
        self._stale_events = 0
        self.policy = "auto"
        """``auto`` (the rule above), ``snapshot`` or ``levels`` (always that path)."""

    def code(self, link: str) -> int:
        """A small integer for a link (stable for the broker's life)."""
        c = self.codes.get(link)
        if c is None:
            c = self.codes[link] = len(self.links)
            self.links.append(link)
            self.is_broker = np.append(self.is_broker, self._is_broker(link))
        return c

    def prepare(self) -> bool:
        """Compile the snapshot of the current table now (e.g. while idle, or before a
        measurement); ``False`` when the engine has none or the policy is ``levels``."""
        return self._snapshot(0, force=True) is not None

    def _snapshot(self, n_events: int, force: bool = False) -> Any:
        m = self.matcher
        if not isinstance(m, Snapshotting) or self.policy == "levels":
            return None
        version = m.version
        snap = self._snap
        if snap is not None and snap.version == version:
            return snap
        if version != self._stale_version:
            self._stale_version = version
            self._stale_events = 0
        if (self.policy == "auto" and not force
                and self._stale_events < max(256, len(self.entries) // 2)):
            self._stale_events += n_events
            return None
        snap = m.snapshot()
        entries = self.entries
        code = self.code
        es = [entries[gid] for gid in snap.profile_ids.tolist()]
        self._dense_link = np.array([code(e.src) for e in es], np.int32)
        self._dense_lid = np.empty(len(es), object)
        self._dense_lid[:] = [e.local_id for e in es]
        self._snap = snap
        return snap

    def match(self, block: Block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR offsets over the block's rows, and per match its link code and the id
        its subscriber knows (in plain string order of the gids within a row)."""
        # extended events (absent values, arrays) have no key columns: matched as events
        snap = None if block.etype.extended else self._snapshot(len(block))
        if snap is not None:
            csr = snap.match_columns(block.etype.name, block.columns())
            return csr.offsets, self._dense_link[csr.profiles], self._dense_lid[csr.profiles]
        entries = self.entries
        code = self.code
        results = self.matcher.match_batch(block.events())
        offsets = np.zeros(len(results) + 1, np.int64)
        np.cumsum([len(r) for r in results], out=offsets[1:])
        es = [entries[gid] for r in results for gid in r]
        lids = np.empty(len(es), object)
        lids[:] = [e.local_id for e in es]
        return offsets, np.array([code(e.src) for e in es], np.int32), lids


__all__ = ["BatchMatch", "RouteResult"]
