"""How long a streaming query has been idle, and stopping it once idle for long enough."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


_IDLE_STATES = ("Waiting for", "Getting offsets from")
"""Spark's status messages of a query that is not working on a batch: waiting for the next
trigger or for data, or listing the source for new input. Every other state (initialising,
writing the offset log, processing, cleaning up state) is work."""


class StreamActivity:
    """How long a streaming query has been idle.

    Idle means no micro-batch is running and Spark's latest look at the source found no
    new input. The clock starts only then: a first micro-batch that takes longer than any
    idle limit is never cut off, and neither is start-up (initialising sources, replaying
    the checkpoint). :meth:`Pipeline.stream` reports the start and end of each batch.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._idle_since: float | None = None
        self.batches = 0
        """Micro-batches finished."""

    def batch_started(self) -> None:
        with self._lock:
            self._running += 1
            self._idle_since = None

    def batch_finished(self) -> None:
        with self._lock:
            self._running -= 1
            self.batches += 1
            self._idle_since = None

    def idle_seconds(self, status: Mapping[str, Any]) -> float:
        """Seconds the query has been idle, given its current ``query.status``."""
        now = self._clock()
        message = str(status.get("message", ""))
        with self._lock:
            busy = (self._running > 0 or bool(status.get("isDataAvailable"))
                    or not message.startswith(_IDLE_STATES))
            if busy:
                self._idle_since = None
                return 0.0
            if self._idle_since is None:
                self._idle_since = now
            return now - self._idle_since


def run_until_idle(query: StreamingQuery, activity: StreamActivity, idle_seconds: float | None,
                   *, poll: int = 1) -> bool:
    """Wait while ``query`` runs; stop it once idle for ``idle_seconds`` (``None``: never).

    Returns True when it stopped for idleness, False when the query ended by itself.
    """
    while query.isActive:
        query.awaitTermination(poll)
        if idle_seconds is not None and query.isActive and \
                activity.idle_seconds(query.status) > idle_seconds:
            query.stop()
            return True
    return False


__all__ = ["StreamActivity", "run_until_idle"]
