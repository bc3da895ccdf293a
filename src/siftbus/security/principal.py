"""Who is on the other end of a connection, once authenticated."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PrincipalKind(enum.Enum):
    """How a principal proved who it is."""

    ANONYMOUS = "anonymous"
    """Nothing proved: only allowed where no security is configured."""
    TOKEN = "token"
    """A bearer token signed with the network's key."""
    CERTIFICATE = "certificate"
    """A client certificate issued by the network's CA (its common name)."""
    BROKER = "broker"
    """A neighbour broker, by its certificate's common name."""
    RECORDED = "recorded"
    """Named by a durable record (the owner of a stored session), not proven now: its
    rights apply to what the record holds (durable profiles after a restart)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated identity and the scopes its credentials carry."""

    name: str
    kind: PrincipalKind
    scopes: frozenset[str] = frozenset()
    """Scopes from the token (empty for certificates); rights come from the policy."""
    expires: float | None = None
    """When the credentials expire (seconds since the epoch), if they do."""

    @property
    def is_broker(self) -> bool:
        return self.kind is PrincipalKind.BROKER


ANONYMOUS = Principal("anonymous", PrincipalKind.ANONYMOUS)
"""The principal of every connection where the network configures no security."""
