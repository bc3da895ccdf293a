"""The channel service's protocol constants, shared by the service and its clients
(the method list is in :mod:`siftbus.channel.remote.service`)."""

from __future__ import annotations

SERVICE_NAME = "channel"
"""The service name in CALL frames (and under which a broker hosts the service)."""
MAX_PULL = 10_000
"""Events one ``pull`` returns at most."""
DEFAULT_WINDOW = 2048
"""Events in flight per push proxy before the service waits for an acknowledgement."""
MAX_WINDOW = 100_000
"""The largest push window a client may ask for."""
FRAME_EVENTS = 512
"""Events per push frame at most (structured and Any proxies)."""

__all__ = ["DEFAULT_WINDOW", "FRAME_EVENTS", "MAX_PULL", "MAX_WINDOW", "SERVICE_NAME"]
