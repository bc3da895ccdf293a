"""The generic handoff, built from publish/subscribe primitives only (Siena's ping/pong).

Tarkoma's baseline (§5.4, Book Alg. 11.1). The brokers' proxies talk through a second
publish/subscribe plane on the same links -- a :class:`~siftbus.broker.protocols.
ProfileForwarding` routing over :data:`CONTROL_SCHEMA`, its messages marked ``plane``:

* *move-out* (the old broker ``a``, from when it holds the session): subscribe
  ``Ping(session = id, to = a)`` (the thesis subscribes it when the client leaves; then
  a process taking the session over, or a rival claim of it, pinged a broker whose
  client was still connected and waited until its handoff timed out);
* *move-in* (the new broker ``b``): subscribe ``Pong(session = id, to = b)``, subscribe
  the client's profiles anew (gids of a new tag), publish ``Ping`` every
  ``ping_interval`` seconds until a ``Pong`` arrives;
* ``a`` answers a ping with ``Pong`` (once it holds the whole state); ``b`` then asks for
  the state out of band, ``a`` sends it out of band and unsubscribes the old profiles
  (its ping a handoff's time later: a ping arriving meanwhile is answered, and the
  request it brings is told where the state went); ``b`` removes duplicates and
  unsubscribes its pong.

The cost is that of ordinary subscriptions: each ping and pong subscription floods the
tree (and so does the old profiles' removal, which makes every broker swap the old gids
for the new). A pong only proves that the ping's path is complete, not that the new
profiles reached every publisher: the protocol is **not mobility-safe** in general --
``tests/broker/test_mobility_sim.py`` finds counter-examples (``docs/mobility.md`` shows one).
The simulator sends the out-of-band messages on direct links; real brokers relay them
along the tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np

from siftbus.errors import WireError
from siftbus.match.engines import make_matcher
from siftbus.model import Event, Profile, StringConstraint, parse_schema
from siftbus.wire.events import Block, decode_batch
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.profiles import decode_profile

from .handoff_base import HandoffBase, HandoffHost
from .protocols import ProfileForwarding
from .sessions import Session, SessionPolicy

CONTROL_SCHEMA = parse_schema("""
[Ping]
session = "string"
to = "string"
from = "string"
epoch = "int[0,2147483647]"

[Pong]
session = "string"
to = "string"
epoch = "int[0,2147483647]"
""")
"""The event types of the control plane."""

PROXY = "@~mobility"
"""The control plane's local client: the broker's mobility proxy."""

PLANE = "mobility"


class _ControlHost:
    """The control plane's view of its broker: the same links, messages marked."""

    def __init__(self, host: HandoffHost, owner: PingPong) -> None:
        self.name = host.name
        self._host = host
        self._owner = owner

    def neighbours_up(self) -> frozenset[str]:
        return self._host.neighbours_up()

    def is_broker(self, link: str) -> bool:
        return not link.startswith("@")

    def send(self, link: str, msg: Message) -> None:
        msg.body["plane"] = PLANE
        self._host.send(link, msg)

    def deliver(self, link: str, items: list[tuple[Block, np.ndarray, list[str]]]) -> None:
        for block, _, _ in items:
            for ev in block.events():
                self._owner.on_control(ev)


class PingPong(HandoffBase):
    """The generic ping/pong handoff (see the module docstring)."""

    name = "pingpong"
    claims: frozenset[str] = frozenset()
    out_of_band = True

    def __init__(self, host: HandoffHost, edges: Iterable[tuple[str, str]],
                 policy: SessionPolicy) -> None:
        super().__init__(host, edges, policy)
        self.control = ProfileForwarding(_ControlHost(host, self), make_matcher("reference"),
                                         "covering")
        self._seq = itertools.count()
        self._open: dict[str, tuple[int, str]] = {}
        """Arriving sessions pinging: id -> (epoch, old broker)."""

    # ---- the control plane ------------------------------------------------------------------

    def link_up(self, z: str) -> None:
        self.control.neighbour_up(z)

    def link_down(self, z: str) -> None:
        super().link_down(z)
        self.control.neighbour_down(z)

    def on_plane(self, z: str, msg: Message) -> None:
        """A control-plane message from neighbour ``z``."""
        t, body = msg.type, msg.body
        c = self.control
        if t is MsgType.SUB:
            for item in get(body, "profiles", list):
                c.subscribe(z, decode_profile(item, CONTROL_SCHEMA, None))
        elif t is MsgType.UNSUB:
            for gid in get(body, "ids", list):
                c.unsubscribe(z, str(gid))
        elif t is MsgType.PUB or t is MsgType.NOTIFY:
            c.route(z, t, [b for b, _, _ in decode_batch(body, CONTROL_SCHEMA)])
        else:
            raise WireError(f"{t.name} is not a control-plane message")

    def _filter(self, gid: str, etype: str, **eq: str) -> Profile:
        et = CONTROL_SCHEMA[etype]
        return Profile.from_constraints(
            gid, et, {k: StringConstraint.make(frozenset({v})) for k, v in eq.items()},
            PROXY[1:])

    def _sub(self, gid: str, etype: str, **eq: str) -> None:
        if gid not in self.control.table:
            self.control.subscribe(PROXY, self._filter(gid, etype, **eq))

    def _unsub(self, gid: str) -> None:
        if gid in self.control.table:
            self.control.unsubscribe(PROXY, gid)

    def _publish(self, etype: str, keys: tuple[Any, ...]) -> None:
        et = CONTROL_SCHEMA[etype]
        block = Block.of_events([Event(et, keys)], f"{self.host.name}/~mobility",
                                np.array([next(self._seq)], np.int64),
                                np.array([self.host.clock()], np.float64))
        self.control.route(PROXY, MsgType.PUB, [block])

    def _ping_gid(self, sid: str) -> str:
        return f"mobility/{self.host.name}/ping/{sid}"

    def _pong_gid(self, sid: str) -> str:
        return f"mobility/{self.host.name}/pong/{sid}"

    # ---- move-out (old broker) --------------------------------------------------------------

    def on_away(self, s: Session) -> None:
        self._sub(self._ping_gid(s.id), "Ping", session=s.id, to=self.host.name)

    def on_back(self, s: Session) -> None:
        # answered while the client is here too: a process taking the session over
        # elsewhere (or a rival claim of it, issue 30 item 2) pings the broker whose
        # client is connected, and waited for a pong until its handoff timed out
        self.on_away(s)

    def on_control(self, ev: Event) -> None:
        """A ping or pong for this broker's proxy."""
        if ev.etype.name == "Ping":
            sid, _, origin, epoch = ev.keys
            table = self.host.sessions
            cur = table.sessions.get(str(sid))
            old = table.outgoing.get(str(sid))
            held = old if old is not None else cur
            if (held is None and str(sid) not in table.moved) or (
                    held is not None and held.state == "arriving") \
                    or not self.overlay.knows(str(origin)):
                return  # not (yet) ours to give: the pinger pings again
            # gone from here: answered all the same, its request is told where to
            # (``nack`` with ``moved``)
            self._publish("Pong", (sid, origin, epoch))
        else:
            sid, _, epoch = ev.keys
            st = self._open.get(str(sid))
            if st is None or st[0] != epoch:
                return
            del self._open[str(sid)]
            self._unsub(self._pong_gid(str(sid)))
            s = self.host.sessions.sessions.get(str(sid))
            if s is not None and s.state == "arriving":
                self.request(s, st[1])

    def after_release(self, sid: str, state: dict[str, Any]) -> None:
        super().after_release(sid, state)
        # still answered for a handoff's time: a rival claim whose first ping reaches
        # here only after the state left pinged here unanswered until its handoff
        # timed out and started empty (1 run in 6 of the two-process test under load)
        self.host.call_later(self.policy.handoff_timeout, lambda: self._forget(sid))

    def _forget(self, sid: str) -> None:
        table = self.host.sessions
        if sid not in table.sessions and sid not in table.outgoing:
            self._unsub(self._ping_gid(sid))

    # ---- move-in (new broker) ----------------------------------------------------------------

    def begin(self, s: Session, previous: str) -> None:
        routing = self.host.routing
        s.tag = s.epoch
        self._sub(self._pong_gid(s.id), "Pong", session=s.id, to=self.host.name)
        for p, pid in self.session_profiles(s, s.tag):
            if p.id not in routing.table:
                routing.subscribe(s.link, p, local_id=pid)
        self.store_profiles(s, s.tag)
        self._open[s.id] = (s.epoch, previous)
        self._ping(s.id, s.epoch)

    def _ping(self, sid: str, epoch: int) -> None:
        st = self._open.get(sid)
        if st is None or st[0] != epoch:
            return
        self._publish("Ping", (sid, st[1], self.host.name, epoch))
        self.host.call_later(self.policy.ping_interval, lambda: self._ping(sid, epoch))

    def established(self, s: Session) -> None:
        if self._open.pop(s.id, None) is not None:
            self._unsub(self._pong_gid(s.id))
        self.on_away(s)  # pinged from now on, the client here or not (on_back)
        super().established(s)

    def _on_nack(self, link: str, body: dict[str, Any]) -> None:
        on = self.moved_on(body)
        if on is None:
            super()._on_nack(link, body)
            return
        s, moved = on
        # its pong anew: the first pong unsubscribed it, and the one from where the
        # state went reached nobody until the handoff timed out
        self._sub(self._pong_gid(s.id), "Pong", session=s.id, to=self.host.name)
        self._open[s.id] = (s.epoch, moved)
        self._ping(s.id, s.epoch)


__all__ = ["CONTROL_SCHEMA", "PingPong"]
