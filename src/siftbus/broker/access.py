"""Who each local client of a broker is, and what it may do there.

A :class:`ClientAccess` is the broker node's side of the security layer's
:class:`~siftbus.security.guard.Guard`: it remembers the principal of every client link,
binds client names to principals, and applies the principal's rights and quotas to each
request before the node acts on it:

* **names**: a client name, once used by a principal at this broker, belongs to that
  principal (for the broker's life; with a durable store, across restarts, so a durable
  session cannot be taken over). Another principal asking for it is refused. An
  anonymous client cannot choose a name. Auto-assigned names skip every name in use or
  bound to another principal (so squatting them blocks nobody), and reuse the principal's
  own idle names, which bounds the names one principal holds; a principal may choose at
  most :data:`MAX_NAMES_PER_PRINCIPAL` names of its own.
* **rights** on SUB (exact covering, or narrowed to disjoint pieces), ADV, PUB (every
  event of a publication inside the publish right, else none is published) and CALL.
* **quotas** per principal over all its connections: profiles and advertisements held
  (``max_profiles``), the publish rate (token bucket). ``max_queued_bytes`` is applied
  by the server, which sees the connections' buffers.

On an open network (no ``[security]``) nothing is checked or bound; only auto-assigned
names still skip names in use.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence

from siftbus.errors import QuotaExceeded, SecurityError
from siftbus.model import Profile
from siftbus.security.guard import Guard
from siftbus.security.principal import ANONYMOUS, Principal, PrincipalKind
from siftbus.security.rights import Rights
from siftbus.wire.events import Block

from .store import ProfileStore

log = logging.getLogger("siftbus.broker")

MAX_NAMES_PER_PRINCIPAL = 1000
"""Client names one principal may choose at a broker (auto-assigned ones are reused)."""

PUBLIC_METHODS = frozenset({("broker", "schema")})
"""Calls every authenticated client may make (it received the schema at HELLO anyway)."""


class ClientAccess:
    """Principals, name bindings, rights and quotas of one broker's local clients."""

    def __init__(self, guard: Guard, broker: str, store: ProfileStore | None = None) -> None:
        self.guard = guard
        self.broker = broker
        self.principals: dict[str, Principal] = {}
        """Client link (``@name``) -> its principal."""
        self.owners: dict[str, str] = {}
        """Client name -> the principal it is bound to."""
        self._names: dict[str, set[str]] = {}
        self._chosen: dict[str, int] = {}
        self._auto = itertools.count(1)
        self._store = store
        self.self_authorizing: set[str] = set()
        """Services that check their callers' rights themselves (with :meth:`rights`)."""
        if store is not None and not guard.open:
            for name, owner in store.owners().items():
                self._bind(name, owner)

    @property
    def open(self) -> bool:
        return self.guard.open

    def principal(self, link: str) -> Principal:
        """The principal of a connected client (``ANONYMOUS`` if unknown)."""
        return self.principals.get(link, ANONYMOUS)

    def rights(self, link: str) -> Rights:
        return self.guard.rights(self.principal(link))

    # ---- names -------------------------------------------------------------------------------

    def _bind(self, name: str, owner: str) -> None:
        self.owners[name] = owner
        self._names.setdefault(owner, set()).add(name)

    def assign_name(self, principal: Principal, in_use: Callable[[str], bool]) -> str:
        """A name for a client that chose none: one of the principal's own idle names,
        else a fresh ``c<n>`` that is neither in use nor bound to anyone."""
        if not self.open:
            for name in sorted(self._names.get(principal.name, ())):
                if not in_use(name) and name[:1] == "c" and name[1:].isdigit():
                    return name
        while True:
            name = f"c{next(self._auto)}"
            if not in_use(name) and name not in self.owners:
                return name

    def attach(self, link: str, principal: Principal, *, chosen: bool,
               bind: bool = True) -> None:
        """Check a connecting client's name against its principal, or refuse (counted),
        and bind it (``bind=False``: later, with :meth:`bind` -- a session's client
        once the session's owner is confirmed, so a refused claim binds nothing)."""
        name = link[1:]
        if not self.open:
            self._check_name(name, principal, chosen)
        self.principals[link] = principal
        if bind:
            self.bind(link, chosen=chosen)

    def _check_name(self, name: str, principal: Principal, chosen: bool) -> None:
        owner = self.owners.get(name)
        if owner is not None and owner != principal.name:
            raise self.guard.deny(principal, "connect", f"as client {name!r}",
                                  "the name belongs to another principal")
        if chosen and principal.kind is PrincipalKind.ANONYMOUS:
            raise self.guard.deny(principal, "connect", f"as client {name!r}",
                                  "anonymous clients get an assigned name")
        if owner is None and chosen:
            n = self._chosen.get(principal.name, 0)
            if n >= MAX_NAMES_PER_PRINCIPAL:
                raise self.guard.refuse(QuotaExceeded(
                    f"{principal.name} has chosen {n} client names at broker "
                    f"{self.broker}, its limit", quota="max_names",
                    limit=MAX_NAMES_PER_PRINCIPAL), principal.name, "connect")

    def bind(self, link: str, *, chosen: bool = True) -> None:
        """Bind a connected client's name to its principal (if it is not bound yet)."""
        name = link[1:]
        principal = self.principals.get(link)
        if self.open or principal is None or name in self.owners:
            return
        if chosen:
            self._chosen[principal.name] = self._chosen.get(principal.name, 0) + 1
        self._bind(name, principal.name)
        if self._store is not None:
            self._store.bind_owner(name, principal.name)

    def detach(self, link: str) -> None:
        self.principals.pop(link, None)

    def owner(self, client: str) -> Principal:
        """The principal a (possibly offline) client name is bound to."""
        p = self.principals.get("@" + client)
        if p is not None:
            return p
        owner = self.owners.get(client)
        return ANONYMOUS if owner is None else Principal(owner, PrincipalKind.RECORDED)

    # ---- rights --------------------------------------------------------------------------------

    def subscribe_pieces(self, link: str, profiles: Sequence[Profile]
                         ) -> list[tuple[Profile, ...]]:
        """What to register for each profile of a SUB: itself, or its narrowed pieces;
        the whole request is refused (counted) when one reaches outside the right."""
        if self.open:
            return [(p,) for p in profiles]
        return self._pieces(self.rights(link), profiles)

    def _pieces(self, rights: Rights, profiles: Sequence[Profile]
                ) -> list[tuple[Profile, ...]]:
        try:
            return [rights.check_subscribe(p) for p in profiles]
        except SecurityError as exc:
            raise self.guard.refuse(exc) from None

    def restored_pieces(self, client: str, p: Profile) -> tuple[Profile, ...] | None:
        """The pieces of a durable profile under its owner's rights now (the config may
        have changed since it was stored); ``None`` (logged) when they refuse it."""
        if self.open:
            return (p,)
        owner = self.owner(client)
        try:
            pieces = self._pieces(self.guard.rights(owner), [p])[0]
        except SecurityError as exc:
            log.warning("%s: durable profile %s of %s is not restored: %s", self.broker,
                        p.id, client, exc)
            return None
        self.guard.usage(owner).hold_profiles(1)  # held already: counted, never refused
        return pieces

    def check_advertise(self, link: str, profiles: Sequence[Profile]) -> None:
        if self.open:
            return
        rights = self.rights(link)
        try:
            for p in profiles:
                rights.check_advertise(p)
        except SecurityError as exc:
            raise self.guard.refuse(exc) from None

    def check_publish(self, link: str, blocks: Sequence[Block]) -> None:
        """Every event inside the publish right and the rate quota not exceeded, or the
        whole publication refused (counted)."""
        if self.open:
            return
        principal = self.principal(link)
        rights = self.guard.rights(principal)
        try:
            for b in blocks:
                rights.check_publish_rows(b.etype, b.keys)
            self.guard.usage(principal).check_publish(sum(len(b) for b in blocks))
        except SecurityError as exc:
            raise self.guard.refuse(exc, principal.name, "publish") from None

    def check_call(self, link: str, service: str, method: str) -> None:
        if (self.open or (service, method) in PUBLIC_METHODS
                or service in self.self_authorizing):
            return
        try:
            self.rights(link).check_call(service, method)
        except SecurityError as exc:
            raise self.guard.refuse(exc) from None

    # ---- quotas ------------------------------------------------------------------------------

    def reserve(self, link: str, n: int) -> None:
        """Count ``n`` more profiles (or advertisements) held by the link's principal."""
        if self.open or not n:
            return
        principal = self.principal(link)
        try:
            self.guard.usage(principal).reserve_profiles(n)
        except QuotaExceeded as exc:
            raise self.guard.refuse(exc, principal.name, "subscribe") from None

    def release(self, client: str, n: int) -> None:
        """``n`` profiles of a (possibly offline) client's principal are gone."""
        if self.open or not n:
            return
        self.guard.usage(self.owner(client)).release_profiles(n)


__all__ = ["MAX_NAMES_PER_PRINCIPAL", "PUBLIC_METHODS", "ClientAccess"]
