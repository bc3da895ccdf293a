"""The limits every siftbus server and client applies to what a peer sends (no I/O).

Hostile input is normal input: each limit bounds the memory or time one request can
cost, is configurable (server constructors take a :class:`Limits`; a network config has
a ``[network.limits]`` table) and, when exceeded, is answered with one ERROR frame whose
``field`` names the limit, while the server goes on serving everyone else. The defaults
and what each limit protects are listed in ``docs/broker.md`` (section "Limits").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from siftbus.errors import ConfigError

MAX_FRAME = 16 * 1024 * 1024
"""Default limit on a frame's length (bytes after the length prefix)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one peer may send; a field's name is the ERROR's ``field`` when it
    is exceeded."""

    max_frame: int = MAX_FRAME
    """Bytes of one frame after its length prefix; a longer declared length is refused
    before any of its bytes is read."""
    max_string: int = 64 * 1024
    """UTF-8 bytes of any string inside a frame (profile values, names, texts)."""
    max_profiles: int = 10_000
    """Profiles (or ids) in one SUB, UNSUB, ADV or UNADV request."""
    max_conditions: int = 4_096
    """Conditions of one profile, counting every interval and every listed string of a
    constraint as one (``a in {1, 5, 9}`` counts three)."""
    max_profile_text: int = 16 * 1024
    """Characters of profile text (the ``texts`` form of SUB/ADV) in one request: text
    is parsed by the profile grammar, which costs far more per character than the
    structured form the client library sends."""
    frame_timeout: float = 30.0
    """Seconds between the first and the last byte of one frame; a frame left half-sent
    longer is refused (idle time between frames is not limited)."""
    hello_timeout: float = 10.0
    """Seconds from accepting a connection until its first frame (HELLO) is complete."""
    max_connections: int = 1_000
    """Connections a server holds at once; one more is answered with ERROR and closed."""
    max_buffered: int = 256 * 1024 * 1024
    """Bytes of received, not yet handled frame data a server holds over all its
    connections; beyond it, connections with data pending stop being read until it
    drops (a connection held that way past ``frame_timeout`` is refused)."""
    max_out_buffer: int = 64 * 1024 * 1024
    """Bytes queued toward one client beyond which notifications to it are dropped
    (counted) and its own requests are not read until it catches up."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            kind = float if f.name.endswith("timeout") else int
            if isinstance(v, bool) or not isinstance(v, kind | int) or v <= 0:
                raise ConfigError(f"limit {f.name} must be a positive "
                                  f"{'number' if kind is float else 'integer'}, got {v!r}",
                                  field=f.name)
        if self.max_buffered < self.max_frame + 4:
            raise ConfigError(f"limit max_buffered ({self.max_buffered}) must hold one whole "
                              f"frame (max_frame + 4 = {self.max_frame + 4})",
                              field="max_buffered")

    def replace(self, **changes: Any) -> Limits:
        """A copy with some limits changed (each checked)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: Limits | None = None) -> Limits:
        """Limits from a config table (unknown keys are refused); unset ones keep
        ``base``'s values (the defaults when ``base`` is ``None``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in names:
                raise ConfigError(f"unknown limit {key!r} (have {', '.join(sorted(names))})",
                                  field=str(key))
        return dataclasses.replace(base or cls(), **dict(data))

    def to_dict(self) -> dict[str, int | float]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


DEFAULT_LIMITS = Limits()
"""The limits a server applies unless told otherwise."""

CLIENT_LIMITS = Limits(max_string=MAX_FRAME)
"""What a client accepts from its broker (it trusts the broker's own checks: only the
frame size is bounded)."""


__all__ = ["CLIENT_LIMITS", "DEFAULT_LIMITS", "MAX_FRAME", "Limits"]
