"""The channel service: a transport-independent facade (method name + msgpack-able args
-> msgpack-able result) over an :class:`EventChannelFactory`.

The facade's handler has the broker's service signature ``handler(method, args, caller)``
so the same object serves inside the siftbus broker (``BrokerServer.register_service
("channel", service)``) and in the small standalone :mod:`siftbus.channel.remote.server`.
The client (:class:`~siftbus.channel.remote.client.ChannelClient`) speaks the siftbus
wire protocol (HELLO, then CALL -> REPLY/ERROR frames) and works against either.

Remote push consumers are pushed to (:mod:`siftbus.channel.remote.hub`,
:class:`~siftbus.channel.remote.push_consumer.RemotePushConsumer`). Remote pull
consumers: ``pull(channel, proxy, max, ack, timeout)`` long-polls, returns
``[[seq, event], ...]`` and takes the acknowledgement of what the consumer has processed;
unacknowledged events are sent again (after a reconnect or a service restart) and the
client drops sequence numbers it has already seen, so a persistent consumer receives
every event exactly once, in order (:mod:`siftbus.channel.remote.client` has the
RemoteConsumer that does this, and the RemoteSupplier that pushes batches).

Methods (``channel``, ``admin``, ``proxy``, ``filter`` are integer ids)::

    create_channel(qos={}, admin={}) -> id          list_channels() -> [info]
    destroy_channel(channel)                       channel_info(channel) -> info
    get_qos(channel[, admin, side][, proxy, side])  set_qos(channel, qos[, ...])
    set_admin(channel, admin)
    new_for_consumers(channel, op="AND_OP") -> id  new_for_suppliers(channel, op) -> id
    obtain_consumer(channel, admin=0, kind="STRUCTURED_EVENT", qos={}) -> proxy
    obtain_supplier(channel, admin=0, kind="STRUCTURED_EVENT", qos={}) -> proxy
    push(channel, proxy, events=[{"structured": {...}} | {"any": v} | {...}]) -> n
    pull(channel, proxy, max=100, ack=None, timeout=0.0, linger=0.0, packed=False)
        -> [[seq, event], ...]   (packed: each event as msgpack bytes, packed once for all
                                  consumers; RemoteConsumer asks for this)
    obtain_push_consumer(channel, admin=0, kind, qos={}) -> proxy   (owned by the caller's
        connection: BestEffort ones are disconnected when it closes)
    attach_push(channel, proxy, window=2048, linger=0.0)  (the service pushes the proxy's
        events to this connection; see siftbus.channel.remote.hub)
    ack(channel, proxy, seq) -> n                  (pushed events handled up to seq)
    echo(events=[...]) -> n                        (round trip only: a benchmark baseline)
    disconnect(channel, proxy, side)               suspend / resume(channel, proxy, side)
    add_filter(channel, constraints, admin|proxy, side) -> {"filter", "id"}
    remove_filter(channel, id, admin|proxy, side)
    set_mapping_filter(channel, which, default, constraints=[[exp, value]], admin|proxy)
    subscription_change(channel, added, removed, admin=0)
    offer_change(channel, added, removed, admin=0)
    obtain_subscription_types(channel) / obtain_offered_types(channel)
    stats(channel) -> {...}
    security_stats() -> {"denials", "denied", "denied_by_principal"}

On a secured network every call is checked first by :meth:`ChannelService.secure`'s
:class:`~siftbus.channel.remote.access.ChannelAccess` (service rights and ownership).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from siftbus.channel import qos as Q
from siftbus.channel.admin import ConsumerAdmin
from siftbus.channel.channel import EventChannel
from siftbus.channel.envelope import Envelope
from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.node import Node
from siftbus.channel.proxy import STRUCTURED_EVENT, Proxy, ProxyConsumer, ProxySupplier
from siftbus.channel.remote.access import ChannelAccess
from siftbus.channel.remote.hub import PushHub
from siftbus.channel.remote.protocol import DEFAULT_WINDOW, MAX_PULL, MAX_WINDOW
from siftbus.errors import (
    ClientTypeError,
    NotConnected,
    ProxyNotFound,
    SiftbusError,
    WireError,
)
from siftbus.security.principal import Principal


def _int(args: Mapping[str, Any], name: str, default: int | None = None) -> int:
    v = args.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise WireError(f"argument {name!r} must be an integer", field=name)
    return v


def _mapping(args: Mapping[str, Any], name: str) -> dict[str, Any]:
    v = args.get(name) or {}
    if not isinstance(v, Mapping):
        raise WireError(f"argument {name!r} must be a map", field=name)
    return dict(v)


def _wire_event(data: Any) -> Envelope:
    if not isinstance(data, Mapping):
        raise WireError("an event must be a map")
    if "any" in data or "structured" in data:
        return Envelope.from_wire(data)
    return Envelope.from_wire({"structured": data})


class ChannelService:
    """Dispatches ``(method, args)`` to the factory's objects; the broker service handler."""

    def __init__(self, factory: EventChannelFactory) -> None:
        self.factory = factory
        self._last_reply: dict[tuple[int, int], float] = {}
        self.pushes = PushHub(factory)
        self._caller = ""
        self._methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("do_")
        }
        self.access: ChannelAccess | None = None
        self._principal_of: Callable[[str], Principal] | None = None

    def secure(self, access: ChannelAccess, principal_of: Callable[[str], Principal]) -> None:
        """Check every call with ``access`` (rights and ownership, see
        :mod:`siftbus.channel.remote.access`); ``principal_of(caller)`` is the host's
        authenticated principal of a caller."""
        self.access = access
        self._principal_of = principal_of
        access.prune(self._exists)  # owners of what the store did not bring back

    def _exists(self, key: tuple[int, str, str, int]) -> bool:
        """Whether the channel object an owner entry names exists now."""
        cid, kind, side, num = key
        if cid not in self.factory.get_all_channels():
            return False
        ch = self.factory.get_event_channel(cid)
        if kind == "admin":
            return num in (ch.get_all_consumeradmins() if side == "consumer"
                           else ch.get_all_supplieradmins())
        if kind == "proxy":
            return ch.find_proxy(side, num) is not None
        return True

    def __call__(self, method: str, args: dict[str, Any], caller: str = "") -> Any:
        """Handle one call; raises a SiftbusError for a bad request (the server answers it
        with an error and goes on serving)."""
        fn = self._methods.get(method)
        if fn is None:
            raise WireError(f"the channel service has no method {method!r}", field="method")
        if not isinstance(args, dict):
            raise WireError("args must be a map", field="args")
        self._caller = caller
        access = self.access
        if access is not None and self._principal_of is not None and not access.open:
            principal = self._principal_of(caller)
            access.check(principal, method, args)
            access.charge(principal, method, args)
            try:
                result = self._run(fn, method, args)
            except BaseException:
                access.refund(principal, method)
                raise
            access.created(principal, method, args, result)
            if method == "destroy_channel":
                access.destroyed(args["channel"])
            elif method == "disconnect":
                access.disconnected(args, self._side(args))
            return result
        return self._run(fn, method, args)

    @staticmethod
    def _run(fn: Callable[[dict[str, Any]], Any], method: str, args: dict[str, Any]) -> Any:
        try:
            return fn(args)
        except SiftbusError:
            raise
        except RecursionError:
            raise WireError(f"{method}: arguments nested too deeply") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"{method}: bad arguments: {exc}") from None

    def set_transport(self, send: Callable[[str, Any], bool],
                      alive: Callable[[str], bool] | None = None) -> None:
        """How the host sends an unsolicited frame to a caller's connection (push
        delivery): ``send(caller, payload) -> False`` when it is gone; ``alive(caller)``
        for hosts that do not call :meth:`connection_lost`."""
        self.pushes.set_transport(send, alive)

    def connection_lost(self, caller: str) -> None:
        """The host lost ``caller``'s connection: its push proxies go (BestEffort) or
        wait for another connection (Persistent)."""
        self.pushes.connection_lost(caller)

    def close(self) -> None:
        self.pushes.close()

    # -- helpers -------------------------------------------------------------------------

    def _channel(self, args: Mapping[str, Any]) -> EventChannel:
        return self.factory.get_event_channel(_int(args, "channel"))

    @staticmethod
    def _side(args: Mapping[str, Any]) -> str:
        side = args.get("side", "consumer")
        if side not in ("consumer", "supplier"):
            raise WireError("side must be 'consumer' or 'supplier'", field="side")
        return str(side)

    def _node(self, ch: EventChannel, args: Mapping[str, Any]) -> Node | EventChannel:
        """The proxy, admin or (with neither given) channel that ``args`` name."""
        side = self._side(args)
        if args.get("proxy") is not None:
            return self._proxy(ch, args, side)
        admin = _int(args, "admin", 0)
        if args.get("admin") is None and "proxy" not in args and "admin" not in args:
            return ch
        return ch.get_consumeradmin(admin) if side == "consumer" else ch.get_supplieradmin(admin)

    @staticmethod
    def _proxy(ch: EventChannel, args: Mapping[str, Any], side: str) -> Proxy:
        pid = _int(args, "proxy")
        p = ch.find_proxy(side, pid)
        if p is None:
            raise ProxyNotFound(f"channel {ch.id} has no {side}-side proxy {pid}",
                                field="proxy")
        return p

    @staticmethod
    def _info(ch: EventChannel) -> dict[str, Any]:
        return {"id": ch.id, "qos": ch.get_qos(), "admin": ch.get_admin(),
                "consumer_admins": ch.get_all_consumeradmins(),
                "supplier_admins": ch.get_all_supplieradmins(),
                "stats": asdict(ch.stats())}

    # -- channels ------------------------------------------------------------------------

    def do_create_channel(self, args: dict[str, Any]) -> int:
        _, cid = self.factory.create_channel(_mapping(args, "qos"), _mapping(args, "admin"))
        return cid

    def do_list_channels(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        return [self._info(self.factory.get_event_channel(c))
                for c in self.factory.get_all_channels()]

    def do_channel_info(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._info(self._channel(args))

    def do_destroy_channel(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        ch.destroy()
        self.pushes.channel_destroyed(ch.id)
        for key in [k for k in self._last_reply if k[0] == ch.id]:
            del self._last_reply[key]

    def do_echo(self, args: dict[str, Any]) -> int:
        """Nothing but the round trip (the thesis's EchoServer baseline)."""
        events = args.get("events")
        return len(events) if isinstance(events, list) else 0

    def do_stats(self, args: dict[str, Any]) -> dict[str, Any]:
        return asdict(self._channel(args).stats())

    def do_get_qos(self, args: dict[str, Any]) -> dict[str, Any]:
        node = self._node(self._channel(args), args)
        return node.get_qos()

    def do_set_qos(self, args: dict[str, Any]) -> None:
        node = self._node(self._channel(args), args)
        node.set_qos(_mapping(args, "qos"))

    def do_set_admin(self, args: dict[str, Any]) -> None:
        self._channel(args).set_admin(_mapping(args, "admin"))

    def do_new_for_consumers(self, args: dict[str, Any]) -> int:
        return self._channel(args).new_for_consumers(args.get("op", Q.AND_OP))[1]

    def do_new_for_suppliers(self, args: dict[str, Any]) -> int:
        return self._channel(args).new_for_suppliers(args.get("op", Q.AND_OP))[1]

    # -- proxies -------------------------------------------------------------------------

    def do_obtain_consumer(self, args: dict[str, Any]) -> int:
        """A pull ProxySupplier for a remote consumer, connected."""
        ch = self._channel(args)
        kind = args.get("kind", STRUCTURED_EVENT)
        admin = ch.get_consumeradmin(_int(args, "admin", 0))
        qos = _mapping(args, "qos")
        proxy, pid = admin.obtain_notification_pull_supplier(kind)
        return self._connect_new(proxy, pid, qos)

    def do_obtain_supplier(self, args: dict[str, Any]) -> int:
        """A push ProxyConsumer for a remote supplier, connected."""
        ch = self._channel(args)
        kind = args.get("kind", STRUCTURED_EVENT)
        admin = ch.get_supplieradmin(_int(args, "admin", 0))
        proxy, pid = admin.obtain_notification_push_consumer(kind)
        proxy.connect_remote()
        return pid

    def do_obtain_push_consumer(self, args: dict[str, Any]) -> int:
        """A push ProxySupplier for a remote consumer, connected, owned by the calling
        connection; events queue in it until ``attach_push`` (then the service pushes)."""
        ch = self._channel(args)
        kind = args.get("kind", STRUCTURED_EVENT)
        admin = ch.get_consumeradmin(_int(args, "admin", 0))
        qos = _mapping(args, "qos")
        proxy, pid = admin.obtain_notification_push_supplier(kind)
        return self._connect_new(proxy, pid, qos,
                                 lambda: self.pushes.own(self._caller, ch, pid))

    @staticmethod
    def _connect_new(proxy: ProxySupplier, pid: int, qos: Mapping[str, Any],
                     prepare: Callable[[], None] | None = None) -> int:
        """Connect a just-obtained proxy for a remote client after ``prepare`` and its
        requested QoS; if either fails, the proxy is disconnected again (nothing leaks)."""
        try:
            if prepare is not None:
                prepare()
            if qos:
                proxy.set_qos(qos)
        except SiftbusError:
            proxy.disconnect()
            raise
        proxy.connect_remote()
        return pid

    def _remote_push_proxy(self, ch: EventChannel, args: Mapping[str, Any]) -> ProxySupplier:
        node = self._proxy(ch, args, "consumer")
        if not isinstance(node, ProxySupplier) or node.mode != "push" or \
                node.client is not None:
            raise ClientTypeError("attach_push/ack need a push ProxySupplier obtained with "
                                  "obtain_push_consumer")
        return node

    def do_attach_push(self, args: dict[str, Any]) -> None:
        """Send the proxy's events to the calling connection from now on (also to take a
        Persistent proxy over after a reconnect or a service restart)."""
        ch = self._channel(args)
        node = self._remote_push_proxy(ch, args)
        window = _int(args, "window", DEFAULT_WINDOW)
        if not 1 <= window <= MAX_WINDOW:
            raise WireError(f"window must be 1..{MAX_WINDOW}", field="window")
        linger = args.get("linger", 0.0)
        if not isinstance(linger, int | float) or isinstance(linger, bool) or \
                not 0 <= linger <= 1:
            raise WireError("linger must be 0..1 seconds", field="linger")
        if not node.connected:
            raise NotConnected(f"push proxy {node.id} is not connected")
        self.pushes.attach(self._caller, ch, node, window, float(linger))

    def do_ack(self, args: dict[str, Any]) -> int:
        """Acknowledge pushed events up to (in sending order) the one numbered ``seq``."""
        ch = self._channel(args)
        node = self._remote_push_proxy(ch, args)
        return self.pushes.ack(self._caller, ch, node, _int(args, "seq"))

    def do_push(self, args: dict[str, Any]) -> int:
        ch = self._channel(args)
        node = self._proxy(ch, args, "supplier")
        events = args.get("events")
        if not isinstance(events, list):
            raise WireError("push needs a list of events", field="events")
        envelopes = []
        for i, e in enumerate(events):
            try:
                envelopes.append(_wire_event(e))
            except SiftbusError as exc:
                exc.message = f"event {i}: {exc.message}"
                raise
        if not isinstance(node, ProxyConsumer):
            raise ClientTypeError("push needs a supplier-side proxy")
        if node.kind != "ANY_EVENT" and any(m.is_any for m in envelopes):
            raise ClientTypeError("a structured proxy takes structured events")
        node.submit(envelopes)
        return len(envelopes)

    def _pull_now(self, ch: EventChannel, args: Mapping[str, Any]) -> list[list[Any]]:
        node = self._proxy(ch, args, "consumer")
        if not isinstance(node, ProxySupplier) or node.mode != "pull":
            raise ClientTypeError("pull needs a pull ProxySupplier (obtain_consumer)")
        n = _int(args, "max", 100)
        if not 1 <= n <= MAX_PULL:
            raise WireError(f"max must be 1..{MAX_PULL}", field="max")
        ack = args.get("ack")
        if ack is not None and (not isinstance(ack, int) or isinstance(ack, bool)):
            raise WireError("ack must be an integer", field="ack")
        if args.get("packed"):
            return [[e.seq, e.envelope.packed()] for e in node.pull_acked(n, ack)]
        return [[e.seq, e.envelope.to_wire()] for e in node.pull_acked(n, ack)]

    def do_pull(self, args: dict[str, Any]) -> Any:
        ch = self._channel(args)
        timeout = args.get("timeout", 0.0)
        timeout = float(min(timeout, 60.0)) if isinstance(timeout, int | float) else 0.0
        linger = args.get("linger", 0.0)
        linger = float(min(linger, 1.0)) if isinstance(linger, int | float) else 0.0
        if linger > 0 and timeout > 0:
            # Pacing: at most one reply per ``linger`` per proxy, so a busy consumer gets
            # batches instead of one round trip per event.
            pid = _int(args, "proxy")
            since = time.monotonic() - self._last_reply.get((ch.id, pid), 0.0)
            if since < linger:
                return self._paced(ch, dict(args), timeout, linger, linger - since)
        got = self._pull_now(ch, args)
        if got or timeout <= 0:
            self._replied(ch, args)
            return got
        return self._long_poll(ch, dict(args), timeout, linger)

    def _replied(self, ch: EventChannel, args: Mapping[str, Any]) -> None:
        if args.get("linger"):
            self._last_reply[(ch.id, _int(args, "proxy"))] = time.monotonic()

    async def _paced(self, ch: EventChannel, args: dict[str, Any], timeout: float,
                     linger: float, delay: float) -> list[list[Any]]:
        await asyncio.sleep(delay)
        got = self._pull_now(ch, args)
        if got:
            self._replied(ch, args)
            return got
        return await self._long_poll(ch, {**args, "ack": None}, max(0.0, timeout - delay),
                                     linger)

    async def _long_poll(self, ch: EventChannel, args: dict[str, Any],
                         timeout: float, linger: float = 0.0) -> list[list[Any]]:
        """Wait for events; ``linger`` seconds after the first arrival let a batch form
        (fewer round trips for many consumers, at that much latency)."""
        try:
            got = await self._wait_events(ch, args, timeout, linger)
        finally:
            self._replied(ch, args)
        return got

    async def _wait_events(self, ch: EventChannel, args: dict[str, Any],
                           timeout: float, linger: float) -> list[list[Any]]:
        loop = asyncio.get_running_loop()
        woke = asyncio.Event()
        loop_thread = threading.get_ident()

        def wake() -> None:
            # Pushes usually arrive on the loop's own thread: set directly, sparing the
            # self-pipe write that call_soon_threadsafe costs per waiting consumer.
            if threading.get_ident() == loop_thread:
                woke.set()
            else:
                loop.call_soon_threadsafe(woke.set)

        ch.add_waiter(wake)
        try:
            deadline = loop.time() + timeout
            args = {**args, "ack": None}  # acknowledged by the first attempt already
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    return []
                woke.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woke.wait(), min(left, 0.05))
                if woke.is_set() and linger > 0:
                    await asyncio.sleep(linger)
                got = self._pull_now(ch, args)
                if got:
                    return got
        finally:
            ch.remove_waiter(wake)

    def do_disconnect(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        node = self._proxy(ch, args, self._side(args))
        node.disconnect()
        self.pushes.forget(ch.id, node.id)
        self._last_reply.pop((ch.id, node.id), None)

    def do_suspend(self, args: dict[str, Any]) -> None:
        """suspend_connection: the proxy keeps queueing but sends nothing until resumed."""
        ch = self._channel(args)
        self._proxy(ch, args, self._side(args)).suspend_connection()

    def do_resume(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        self._proxy(ch, args, self._side(args)).resume_connection()

    # -- filters -------------------------------------------------------------------------

    def do_add_filter(self, args: dict[str, Any]) -> dict[str, int]:
        ch = self._channel(args)
        node = self._node(ch, args)
        if not isinstance(node, Node):
            raise WireError("add_filter needs admin or proxy", field="admin")
        cons = args.get("constraints", [])
        if not isinstance(cons, list):
            raise WireError("constraints must be a list", field="constraints")
        f = ch.default_filter_factory.create_filter()
        try:
            f.add_constraints(cons)
            attach = node.add_filter(f)
        except BaseException:
            f.destroy()
            raise
        return {"filter": f.id, "id": attach}

    def do_remove_filter(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        node = self._node(ch, args)
        if not isinstance(node, Node):
            raise WireError("remove_filter needs admin or proxy", field="admin")
        attach = _int(args, "id")
        f = node.get_filter(attach)
        node.remove_filter(attach)
        f.destroy()

    def do_set_mapping_filter(self, args: dict[str, Any]) -> int:
        ch = self._channel(args)
        node = self._node(ch, args)
        which = args.get("which")
        if which not in ("priority", "lifetime"):
            raise WireError("which must be 'priority' or 'lifetime'", field="which")
        if not isinstance(node, ConsumerAdmin | ProxySupplier):
            raise ClientTypeError("mapping filters go on consumer admins and proxy suppliers")
        cons = args.get("constraints", [])
        if not isinstance(cons, list):
            raise WireError("constraints must be a list", field="constraints")
        mf = ch.default_filter_factory.create_mapping_filter(default_value=args.get("default"))
        try:
            mf.add_mapping_constraints(cons)
        except BaseException:
            mf.destroy()
            raise
        if which == "priority":
            node.priority_filter = mf
        else:
            node.lifetime_filter = mf
        return mf.id

    # -- subscriptions and offers --------------------------------------------------------

    def do_subscription_change(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        ch.get_consumeradmin(_int(args, "admin", 0)).subscription_change(
            args.get("added", []), args.get("removed", []))

    def do_offer_change(self, args: dict[str, Any]) -> None:
        ch = self._channel(args)
        ch.get_supplieradmin(_int(args, "admin", 0)).offer_change(
            args.get("added", []), args.get("removed", []))

    def do_obtain_subscription_types(self, args: dict[str, Any]) -> list[list[str]]:
        return [list(t) for t in self._channel(args).subscribed_types()]

    def do_obtain_offered_types(self, args: dict[str, Any]) -> list[list[str]]:
        return [list(t) for t in self._channel(args).offered_types()]

    def do_security_stats(self, args: dict[str, Any]) -> dict[str, Any]:
        """Denials by ``kind/action``, their total and by principal (empty when open)."""
        if self.access is None:
            return {"denials": {}, "denied": 0, "denied_by_principal": {}}
        return self.access.guard.stats()


__all__ = ["ChannelService"]
