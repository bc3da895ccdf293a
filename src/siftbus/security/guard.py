"""One server's gatekeeper: authenticates peers, answers what a principal may do, keeps
each principal's quota usage and counts every denial.

Every siftbus server (broker, channel server, XML endpoint) holds one :class:`Guard`
built from the network's :class:`~siftbus.security.policy.SecurityPolicy`; the same
policy therefore gives the same answers on every path. On an open network (no
``[security]`` section) the guard allows everything and costs nothing: servers test
:attr:`Guard.open` first and skip the checks.

:func:`check_bind` is the safe default every server applies before it listens: without
TLS and authentication, only loopback addresses, unless the operator says ``insecure``
(then it logs that loudly).
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from typing import Any

from siftbus.errors import AccessDenied, ConfigError, SecurityError

from .audit import Audit
from .policy import OPEN, Authenticator, SecurityPolicy
from .principal import Principal
from .quotas import QuotaUsage
from .rights import Rights

log = logging.getLogger("siftbus.security")


class Guard:
    """Authentication, rights, quotas and the audit of one server."""

    def __init__(self, policy: SecurityPolicy = OPEN, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.audit = Audit()
        self._auth = Authenticator(policy)
        self._clock = clock
        self._rights: dict[tuple[str, bool, frozenset[str]], Rights] = {}
        self._usage: dict[str, QuotaUsage] = {}

    @property
    def open(self) -> bool:
        """No security configured: everything allowed, nothing checked."""
        return self.policy.open

    def refuse(self, exc: SecurityError, principal: str = "", action: str = "",
               object: str = "") -> SecurityError:
        """Count and log a denial; returns ``exc`` for the caller to raise."""
        self.audit.record(exc, principal=principal, action=action, object=object)
        return exc

    def deny(self, principal: Principal, action: str, obj: str, why: str) -> AccessDenied:
        """A counted :class:`AccessDenied` (for checks that are not rights of profiles:
        a name of another principal, a callback URL, someone else's channel)."""
        exc = AccessDenied(f"{principal.name} may not {action} {obj}: {why}",
                           principal=principal.name, action=action, object=obj)
        self.refuse(exc)
        return exc

    # ---- authentication --------------------------------------------------------------------

    def client(self, token: object, ssl_object: Any = None, *, peer: str = "") -> Principal:
        """The principal of a client (its HELLO token or certificate), or a counted
        :class:`~siftbus.errors.AuthenticationError`."""
        try:
            return self._auth.client(token, ssl_object)
        except SecurityError as exc:
            raise self.refuse(exc, principal=f"?@{peer}" if peer else "",
                              action="connect") from None

    def broker(self, claimed: str, ssl_object: Any = None, *, peer: str = "") -> Principal:
        """A neighbour broker proven by its certificate (see
        :meth:`~siftbus.security.policy.Authenticator.broker`)."""
        try:
            return self._auth.broker(claimed, ssl_object)
        except SecurityError as exc:
            raise self.refuse(exc, principal=f"{claimed}?@{peer}" if peer else claimed,
                              action="link") from None

    # ---- authorization and quotas -------------------------------------------------------------

    def rights(self, principal: Principal) -> Rights:
        """What ``principal`` may do (cached: rights are fixed by the policy)."""
        key = (principal.name, principal.is_broker, principal.scopes)
        r = self._rights.get(key)
        if r is None:
            r = self._rights[key] = self.policy.rights(principal).scoped(principal.scopes)
        return r

    def usage(self, principal: Principal) -> QuotaUsage:
        """The quota usage of ``principal``, shared by all its connections."""
        u = self._usage.get(principal.name)
        if u is None:
            u = self._usage[principal.name] = QuotaUsage(
                principal.name, self.policy.quotas(principal), self._clock)
        return u

    def check_callback(self, principal: Principal, url: str) -> None:
        """Refuse a callback URL outside the policy's allowed prefixes."""
        if not self.policy.callback_allowed(url):
            allowed = ", ".join(self.policy.callback_prefixes) or "none configured"
            raise self.deny(principal, "register a callback to", url[:200],
                            f"callback URLs must start with an allowed prefix ({allowed})")

    def stats(self) -> dict[str, Any]:
        """Denials by ``kind/action``, their total, and by principal."""
        return {"denials": self.audit.to_dict(), "denied": self.audit.total(),
                "denied_by_principal": dict(self.audit.by_principal)}


def is_loopback(host: str) -> bool:
    """Whether a listen address reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name, "" or "0.0.0.0"-like: may be reachable from outside


def check_bind(host: str, *, tls: bool, authenticated: bool, insecure: bool,
               what: str) -> None:
    """The safe default of every server: a non-loopback address needs TLS and
    authentication, or an explicit ``insecure`` (then logged at ERROR, loudly)."""
    if is_loopback(host) or (tls and authenticated):
        return
    missing = " and ".join(w for w, ok in (("TLS", tls), ("authentication", authenticated))
                           if not ok)
    if not insecure:
        raise ConfigError(f"{what} would listen on {host or 'every address'} without "
                          f"{missing}; configure [security] (see docs/security.md) or "
                          "pass --insecure to accept the risk", field="host")
    log.error("INSECURE: %s listens on %s without %s: anyone who can reach it can read "
              "and inject events (--insecure)", what, host or "every address", missing)


__all__ = ["Guard", "check_bind", "is_loopback"]
