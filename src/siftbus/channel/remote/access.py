"""Who may do what on the channel service (the security hook of ``channel.remote``).

On a secured network (a :class:`~siftbus.security.guard.Guard` that is not open) every
call is checked twice before the service runs it:

1. **Service rights.** Administrative methods (:data:`ADMIN_METHODS`: create, destroy,
   list channels, their stats, channel-wide QoS and admin properties, the service's
   denial counters) need the service right ``channel.<method>``; every other method
   needs ``channel.<method>`` or ``channel.use`` (the right of an ordinary supplier or
   consumer). Rights come from the network's ``[security.principals]`` ``services``
   patterns, as for the broker's services.
2. **Ownership.** Channels, admins and proxies belong to the principal that created
   them. A call naming a proxy or an admin (other than a channel's default admin 0)
   needs its owner or the channel's owner; changing a channel's shared objects (its
   default admin's filters, subscription and offer changes, destroying it) needs the
   channel's owner. A principal with the right ``channel.admin`` (``channel.*`` gives
   it) owns everything: the operator's right.

So nobody pulls or acknowledges someone else's persistent events, pushes through
someone else's proxy or destroys a channel they neither own nor administer. Every
refusal is an :class:`~siftbus.errors.AccessDenied`, logged and counted by the guard.

Owners survive a restart: with a store file they are kept in ``<store>.owners.json``
beside it (:class:`~siftbus.security.owners.OwnersFile`; objects restored without a
recorded owner, such as those created before security was configured, belong to
``channel.admin`` principals only).

**Quotas** are the principal's, from the same policy and counted by the same
:class:`~siftbus.security.quotas.QuotaUsage` as at a broker (the guard's, shared by all
the principal's connections): ``max_profiles`` bounds the objects it holds (channels,
admins and proxies it created and has not destroyed or disconnected; restored ones
count), ``publish_rate``/``publish_burst`` the events it pushes per second (a token
bucket). Exceeding one refuses the call whole with a counted, retriable
:class:`~siftbus.errors.QuotaExceeded` naming the quota: nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from siftbus.errors import AccessDenied, ConfigError, QuotaExceeded, SecurityError
from siftbus.security.guard import Guard
from siftbus.security.owners import OwnersFile
from siftbus.security.principal import Principal, PrincipalKind

ADMIN_METHODS = frozenset({"create_channel", "destroy_channel", "list_channels", "stats",
                           "channel_info", "set_admin", "security_stats"})
"""Methods that need their own service right ``channel.<method>`` (not ``channel.use``)."""

ADMIN_RIGHT = "admin"
"""``channel.admin``: may act on every channel, admin and proxy."""

USE_RIGHT = "use"
"""``channel.use``: may call every method that is not in :data:`ADMIN_METHODS`."""

_CREATES_ADMIN = {"new_for_consumers": "consumer", "new_for_suppliers": "supplier"}
_CREATES_PROXY = {"obtain_consumer": "consumer", "obtain_push_consumer": "consumer",
                  "obtain_supplier": "supplier"}
_SIDE = {"obtain_consumer": "consumer", "obtain_push_consumer": "consumer",
         "obtain_supplier": "supplier", "subscription_change": "consumer",
         "offer_change": "supplier", "push": "supplier", "pull": "consumer",
         "ack": "consumer", "attach_push": "consumer"}
"""The side of the proxy or admin these methods act on whatever their ``side`` argument
says (as the service reads them); the others take ``side`` (default consumer). Checking
ownership on another side than the service acts on would let a caller name someone
else's proxy by the number of its own."""
_CHANNEL_WIDE = {"subscription_change", "offer_change", "set_qos", "add_filter",
                 "remove_filter", "set_mapping_filter", "destroy_channel", "set_admin"}
"""Methods that change a channel's shared objects when they name no proxy or admin of
their own (the channel itself or its default admin 0)."""

CREATES = frozenset({"create_channel", *_CREATES_ADMIN, *_CREATES_PROXY})
"""Methods that create an object the caller then holds (its ``max_profiles`` quota)."""

Key = tuple[int, str, str, int]
"""(channel, ``"admin"``/``"proxy"``, side, id); the channel itself is (id, "", "", 0)."""


def _id(args: Mapping[str, Any], name: str, default: int | None = None) -> int | None:
    v = args.get(name, default)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ChannelAccess:
    """Service rights and ownership for one channel service, under ``guard``."""

    def __init__(self, guard: Guard, store: str | Path | None = None) -> None:
        self.guard = guard
        self._owners: dict[Key, str] = {}
        self._file = OwnersFile(store, "channel") if store else None
        if self._file is not None:
            self._load(self._file)

    @property
    def open(self) -> bool:
        return self.guard.open

    # ---- owners, kept beside the store ------------------------------------------------------

    def _load(self, file: OwnersFile) -> None:
        rows = file.load()
        try:
            self._owners = {(int(c), str(k), str(s), int(i)): str(p)
                            for c, k, s, i, p in rows}
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"cannot read the channel owners file: {exc}",
                              source=str(file.path)) from None
        if not self.guard.open:
            for owner in self._owners.values():  # held already: counted, never refused
                self._usage(owner).hold_profiles(1)

    def _save(self) -> None:
        if self._file is not None:
            self._file.save([[*k, p] for k, p in self._owners.items()])

    def _usage(self, name: str) -> Any:
        return self.guard.usage(Principal(name, PrincipalKind.RECORDED))

    def prune(self, exists: Callable[[Key], bool]) -> int:
        """Forget the owners of objects that no longer exist (a channel, admin or proxy
        the store did not bring back after a restart): a stale entry would answer
        another principal "it belongs to another principal" where the truth is "no such
        object", telling it that the object existed and was someone's. Returns how
        many were forgotten."""
        gone = [k for k in self._owners if not exists(k)]
        for k in gone:
            self._usage(self._owners.pop(k)).release_profiles(1)
        if gone:
            self._save()
        return len(gone)

    def owner(self, key: Key) -> str | None:
        """The principal that created the object, if recorded."""
        return self._owners.get(key)

    # ---- checks -----------------------------------------------------------------------------

    def check(self, principal: Principal, method: str, args: Mapping[str, Any]) -> None:
        """Raise a counted :class:`~siftbus.errors.AccessDenied` unless ``principal`` may
        call ``method`` with ``args``."""
        if self.guard.open:
            return
        rights = self.guard.rights(principal)
        if not (rights.may_call("channel", method) or (
                method not in ADMIN_METHODS and rights.may_call("channel", USE_RIGHT))):
            try:
                rights.check_call("channel", method)
            except SecurityError as exc:
                raise self.guard.refuse(exc, principal.name, "call",
                                        f"channel.{method}") from None
        if rights.may_call("channel", ADMIN_RIGHT) or method in ("create_channel",
                                                                   "list_channels",
                                                                   "echo",
                                                                   "security_stats"):
            return
        ch = _id(args, "channel")
        if ch is None:
            return  # the service refuses the malformed call itself
        mine = self._owners.get((ch, "", "", 0)) == principal.name
        if mine:
            return
        side = _SIDE.get(method) or args.get("side", "consumer")
        proxy = _id(args, "proxy")
        if args.get("proxy") is not None:
            self._need(principal, (ch, "proxy", str(side), proxy if proxy is not None else -1),
                       method, f"proxy {args.get('proxy')!r} of channel {ch}")
            return
        admin = _id(args, "admin", 0)
        if args.get("admin") is not None and admin != 0:
            self._need(principal, (ch, "admin", str(side), admin if admin is not None else -1),
                       method, f"admin {args.get('admin')!r} of channel {ch}")
            return
        if method in _CHANNEL_WIDE:
            raise self._deny(principal, method, f"channel {ch}", "it changes objects of a "
                             "channel the principal does not own")

    # ---- quotas (the broker's QuotaUsage, per principal) ------------------------------------

    def charge(self, principal: Principal, method: str, args: Mapping[str, Any]) -> None:
        """Count what the call will use against the principal's quotas, or refuse it
        whole with a counted :class:`~siftbus.errors.QuotaExceeded`: one more object
        held for a creating method, the rate for the events of a push. :meth:`refund`
        gives the object back when the call then fails."""
        if self.guard.open:
            return
        usage = self.guard.usage(principal)
        try:
            if method in CREATES:
                usage.reserve_profiles(1)
            elif method == "push" and isinstance(args.get("events"), list):
                usage.check_publish(len(args["events"]))
        except QuotaExceeded as exc:
            raise self.guard.refuse(exc, principal.name, f"channel.{method}") from None

    def refund(self, principal: Principal, method: str) -> None:
        """A call :meth:`charge` counted failed: the object it reserved is not held."""
        if not self.guard.open and method in CREATES:
            self.guard.usage(principal).release_profiles(1)

    def disconnected(self, args: Mapping[str, Any], side: str) -> None:
        """A proxy was disconnected: its owner no longer holds it."""
        ch, proxy = _id(args, "channel"), _id(args, "proxy")
        owner = self._owners.pop((ch or 0, "proxy", side, proxy if proxy is not None else -1),
                                 None)
        if owner is not None:
            self._usage(owner).release_profiles(1)
            self._save()

    def _need(self, principal: Principal, key: Key, method: str, what: str) -> None:
        if self._owners.get(key) != principal.name:
            raise self._deny(principal, method, what, "it belongs to another principal")

    def _deny(self, principal: Principal, method: str, what: str, why: str) -> AccessDenied:
        exc = AccessDenied(f"{principal.name} may not call channel.{method} on {what}: {why}",
                           principal=principal.name, action="call",
                           object=f"channel.{method} {what}")
        self.guard.refuse(exc)
        return exc

    def created(self, principal: Principal, method: str, args: Mapping[str, Any],
                result: Any) -> None:
        """Record the owner of what ``method`` just created (``result`` is its id)."""
        if self.guard.open:
            return
        ch = _id(args, "channel")
        if not isinstance(result, int) or isinstance(result, bool):
            key = None
        elif method == "create_channel":
            key = (result, "", "", 0)
        elif method in _CREATES_ADMIN and ch is not None:
            key = (ch, "admin", _CREATES_ADMIN[method], result)
        elif method in _CREATES_PROXY and ch is not None:
            key = (ch, "proxy", _CREATES_PROXY[method], result)
        else:
            key = None
        if key is None:
            self.refund(principal, method)  # nothing recorded: nothing held
            return
        prev = self._owners.get(key)
        if prev is not None:  # a stale record of an id used again: the old one is gone
            self._usage(prev).release_profiles(1)
        self._owners[key] = principal.name
        self._save()

    def destroyed(self, channel: int) -> None:
        """Forget the owners of a destroyed channel's objects."""
        gone = [k for k in self._owners if k[0] == channel]
        for k in gone:
            self._usage(self._owners.pop(k)).release_profiles(1)
        if gone:
            self._save()


__all__ = ["ADMIN_METHODS", "ADMIN_RIGHT", "CREATES", "USE_RIGHT", "ChannelAccess"]
