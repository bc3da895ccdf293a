"""The client's reconnection policy: how often and how long it tries to get back to a
broker, how much it keeps of what is published meanwhile, and whom it tells.

The defaults follow nats.py and paho-mqtt: on, a short first wait doubling up to a few
seconds with jitter (so clients of a restarted broker do not all come back at once), a
bounded publish buffer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Server = tuple[str, int]
"""A broker's ``(host, port)``."""

_JITTER = random.Random()
"""The jitter's own generator: a library must not move the process's global random state
(an application's seeded run, or hypothesis in tests, would see it change from a
client's background thread)."""


@dataclass(frozen=True, slots=True)
class Reconnect:
    """``Client.connect(reconnect=Reconnect(...))``; ``reconnect=False`` turns it off."""

    enabled: bool = True
    attempts: int = 120
    """Connection attempts before giving up (over every server in turn); -1: forever."""
    first_wait: float = 0.05
    """Seconds before the first attempt; doubled after each, up to :attr:`max_wait`."""
    max_wait: float = 2.0
    jitter: float = 0.2
    """Each wait is shortened by up to this fraction at random."""
    buffer: int = 10_000
    """Events published while reconnecting that are kept and sent after it; one more
    is refused with :class:`~siftbus.errors.ConnectionLostError`."""


def reconnect_delays(policy: Reconnect) -> Iterator[float]:
    """The wait before each attempt (``policy.attempts`` of them, or forever)."""
    wait = policy.first_wait
    n = 0
    while policy.attempts < 0 or n < policy.attempts:
        yield wait * (1 - _JITTER.random() * policy.jitter)
        wait = min(wait * 2, policy.max_wait)
        n += 1


Hook = Callable[[Any], Any]


@dataclass(slots=True)
class ConnectionEvents:
    """Who is told of a lost connection and of its return (each called with the client;
    a coroutine function's coroutines run as tasks; a hook that raises is logged)."""

    on_disconnect: Hook | None = None
    on_reconnect: Hook | None = None
    reconnects: int = 0
    """Reconnections so far."""
    failures: list[BaseException] = field(default_factory=list)
    """Exceptions the hooks raised (kept for inspection; never raised)."""

    def fire(self, hook: Hook | None, client: Any,
             spawn: Callable[[Awaitable[Any]], None]) -> None:
        if hook is None:
            return
        try:
            result = hook(client)
        except Exception as exc:  # a user's hook must not stop the client
            self.failures.append(exc)
            return
        if asyncio.iscoroutine(result):
            spawn(result)


__all__ = ["ConnectionEvents", "Reconnect", "Server", "reconnect_delays"]
