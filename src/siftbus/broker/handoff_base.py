"""What every handoff protocol shares: overlay addresses, the state transfer, locating a
session, the publisher's probe.

A handoff moves a session from its old access broker ``a`` to the new one ``b`` where its
client has just connected. The protocols (:mod:`.handoff_paths`, :mod:`.pingpong`)
differ in how ``b`` comes to receive the session's notifications and how it learns that
it safely can; this base does the rest, with ``HANDOFF`` messages (body ``k``: the kind):

* **overlay addresses** (Tarkoma's first enabling technique): every broker knows the
  tree, so a message for broker ``x`` travels hop by hop toward it (``to``), never
  flooded;
* ``req`` (``b`` -> ``a``) asks for the state, ``xfer`` (``a`` -> ``b``, in parts of at
  most :data:`PART_BYTES`) carries it (:meth:`SessionTable.release
  <siftbus.broker.session_table.SessionTable.release>`), ``nack`` says it is not there
  (with where it went, if known; ``folded``: an arriving copy lost to the requester
  itself, which then locates the session again); a request for a session that is itself
  still arriving waits until it is here (moves faster than handoffs chain up);
* ``loc``/``echo``: when the client cannot say where it was (a fresh process that only
  knows its session id), ``b`` floods a locate wave and each broker echoes the newest
  holder in its subtree (2 messages per link);
* ``chk``/``cha`` and ``cw``/``ce`` (secured networks): before any of this, the holders
  confirm that the connecting client's principal owns the session (:mod:`.claims`);
  ``cw``/``ce`` also find the newest copy for a fresh process (no epoch), before its
  HELLO is answered, on every network;
* ``probe``/``pecho`` (advertisement mode): a publisher that moved publishes at ``b``
  only after a probe went to ``a`` and back behind its advertisement, so every
  subscription that followed the old advertisement has reached ``b`` (Tarkoma §5.5.3);
  the old advertisement stays until the probe has passed.
"""

from __future__ import annotations

import itertools
import logging
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol

from siftbus.errors import ConfigError, WireError
from siftbus.model import Profile, Schema
from siftbus.wire.frames import Message, MsgType, get
from siftbus.wire.profiles import decode_profile, encode_profile

from . import locate_order
from .claims import ClaimCheck, Found, Verdict
from .duplicates import Seen
from .overlay import Overlay
from .protocols import Routing
from .session_table import SessionRequest, SessionTable, session_gid
from .sessions import SESSION_PREFIX, Session, SessionPolicy
from .store import ProfileStore
from .waves import EchoWaves, Wave

log = logging.getLogger("siftbus.broker")

PART_BYTES = 4 * 1024 * 1024
"""Bytes of buffered rows per ``xfer`` message (a session's buffer may exceed a frame)."""

ANY_EPOCH = 2**62
"""Above every epoch: a copy "older than this" is any copy."""

DRAIN_TIMEOUT = 2.0
"""Seconds a session taken from a connected process waits for it to acknowledge the
rows it was sent (:meth:`HandoffBase.hand_over`)."""


class HandoffHost(Protocol):
    """What a handoff protocol needs from its broker node."""

    name: str
    schema: Schema
    routing: Routing
    store: ProfileStore | None
    clients: set[str]
    sessions: SessionTable

    def send(self, link: str, msg: Message) -> None: ...

    def neighbours_up(self) -> frozenset[str]: ...

    def clock(self) -> float: ...

    def call_later(self, delay: float, fn: Any) -> None: ...


class HandoffBase(ABC):
    """The common part of the handoff protocols (see the module docstring)."""

    name = ""
    claims: frozenset[str] = frozenset()
    """The routing protocols under which this handoff claims mobility-safety (checked in
    ``tests/broker/test_mobility_sim.py``)."""
    out_of_band = False
    """Whether ``req``/``xfer`` go directly between the two brokers (ping/pong) rather
    than along the tree; the simulator honours it, real brokers relay along the tree."""

    def __init__(self, host: HandoffHost, edges: Iterable[tuple[str, str]],
                 policy: SessionPolicy) -> None:
        self.host = host
        self.overlay = Overlay(edges, host.name)
        self.policy = policy
        self.direct: Any = None
        """Set by a transport that can reach any broker directly: ``direct(broker, msg)``
        (the simulator's out-of-band links)."""
        self.counts: dict[str, int] = defaultdict(int)
        """``HANDOFF`` messages sent (and relayed) here, by kind."""
        self._waiting: dict[str, list[tuple[str, int]]] = {}
        self._parts: dict[str, list[dict[str, Any]]] = {}
        self._locates = EchoWaves(
            self.send, host.neighbours_up, lambda lid, v: {
                "k": "echo", "l": lid, "best": v and v[0], "newer": v and v[1]},
            locate_order.merge, self._located)
        self._lids = itertools.count(1)
        self._probed: set[str] = set()
        self._kept_adverts: dict[str, list[str]] = {}
        self.handlers: dict[str, Any] = {
            "req": self._on_req, "xfer": self._on_xfer, "nack": self._on_nack,
            "loc": self._on_locate, "echo": self._on_echo, "probe": self._on_probe,
            "pecho": self._on_pecho}
        self.hop_kinds = {"loc", "echo"}
        """Kinds every broker on the way handles (the others are relayed to ``to``)."""
        self.owner_check = ClaimCheck(self)
        """The owner check before a handoff on a secured network (:mod:`.claims`)."""

    # ---- messages ------------------------------------------------------------------------

    def send(self, link: str, body: dict[str, Any]) -> None:
        self.counts[body["k"]] += 1
        self.host.send(link, Message(MsgType.HANDOFF, body))

    def send_to(self, dest: str, body: dict[str, Any], oob: bool = False) -> None:
        """Send ``body`` to broker ``dest``: along the tree, or directly with ``oob``
        when the transport can."""
        body["to"] = dest
        if dest == self.host.name:
            self.receive(dest, body)
        elif oob and self.direct is not None:
            self.counts[body["k"]] += 1
            self.direct(dest, Message(MsgType.HANDOFF, body))
        else:
            self.send(self.overlay.next_hop(dest), body)

    def receive(self, link: str, body: dict[str, Any]) -> None:
        """A ``HANDOFF`` message from a neighbour (or from this broker itself)."""
        kind = get(body, "k", str, where="HANDOFF")
        handler = self.handlers.get(kind)
        if handler is None:
            raise WireError(f"unknown HANDOFF kind {kind!r}", field="k")
        to = body.get("to")
        if kind not in self.hop_kinds and to is not None and to != self.host.name:
            self.send(self.overlay.next_hop(str(to)), body)  # relay
            return
        handler(link, body)

    def session_epoch(self, sid: str) -> int | None:
        """The newest attachment of ``sid`` this broker knows, stamped on SUB and UNSUB
        of its profiles (``None``: this protocol does not use it)."""
        return None

    def accepts(self, z: str, gid: str, epochs: Any, subscribe: bool = True) -> bool:
        """Whether a neighbour's SUB or UNSUB of ``gid`` (``epochs``: the ``se`` stamp
        of its message) is applied; by default every one is."""
        return True

    def link_up(self, z: str) -> None:  # noqa: B027 - a hook: nothing by default
        """A neighbour link came up (ping/pong's control plane follows the links)."""

    def link_down(self, z: str) -> None:
        """A neighbour link went (owner checks waiting for it go on without it)."""
        self.owner_check.link_down(z)

    def on_plane(self, z: str, msg: Message) -> None:
        """A control-plane message (only ping/pong has a control plane)."""
        raise WireError(f"handoff {self.name} has no control plane", field="plane")

    # ---- the session table's questions (Mover) --------------------------------------------------

    def check(self, sid: str, owner: str, previous: str | None, done: Verdict
              ) -> str | None:
        """Ask the holders of ``sid`` whether ``owner`` owns it (:meth:`ClaimCheck.check
        <siftbus.broker.claims.ClaimCheck.check>`)."""
        return self.owner_check.check(sid, owner, previous, done)

    def find(self, sid: str, owner: str, done: Found) -> None:
        """Find the newest copy of ``sid`` in the tree for a fresh process (and check its
        owner on a secured network): :meth:`ClaimCheck.find
        <siftbus.broker.claims.ClaimCheck.find>`."""
        self.owner_check.find(sid, owner, done)

    def newest_copy(self, sid: str) -> list[Any] | None:
        """``[epoch, broker, tag, profiles]`` of the newest copy of ``sid`` held here."""
        return locate_order.older_copy(self, sid, ANY_EPOCH)

    def move_in(self, s: Session, req: SessionRequest) -> None:
        """A client arrived with a session held elsewhere."""
        if req.profiles is not None:
            s.profiles = {p.id: p for p in req.profiles}
        self.claim(s)
        self._advertise(s, req)
        if req.previous is not None and req.profiles is not None \
                and self.overlay.knows(req.previous) and req.previous != self.host.name:
            self._probe(s, req.previous)
            self.begin(s, req.previous)
        else:
            self.locate(s)

    def next_epoch(self, after: int) -> int:
        """The epoch an attachment here numbered from ``after`` claims (:mod:`.overlay`)."""
        return self.overlay.next_epoch(after)

    @abstractmethod
    def begin(self, s: Session, previous: str) -> None:
        """Start taking the session over from ``previous`` (its profiles are known)."""

    def claim(self, s: Session) -> None:  # noqa: B027 - a hook: nothing by default
        """The session's newest attachment is here from now on (before it is located:
        older moves arriving meanwhile must not take its profiles away)."""

    def on_away(self, s: Session) -> None:  # noqa: B027 - a hook: nothing by default
        """Its client left; by default nothing is done until someone asks for it."""

    def on_back(self, s: Session) -> None:  # noqa: B027 - a hook: nothing by default
        """Its client came back here."""

    def give_up(self, s: Session) -> None:
        log.warning("%s: handoff of session %s timed out", self.host.name, s.id)
        self.host.sessions.establish(s, None)

    def established(self, s: Session) -> None:
        """The session is here: drop the gids an earlier incarnation left on its link
        (they would outlive the client's unsubscription: seed 298 of the rendezvous
        handoff), and answer the requests that waited for it."""
        routing = self.host.routing
        mine = f"{SESSION_PREFIX}{s.id}/{s.tag}/"
        for e in routing.table.entries_from(s.link):
            if e.id.startswith(f"{SESSION_PREFIX}{s.id}/") and not e.id.startswith(mine):
                routing.unsubscribe(s.link, e.id)
        for to, epoch in self._waiting.pop(s.id, []):
            self.hand_over(s.id, to, epoch)

    # ---- the old broker's side ----------------------------------------------------------------

    def request(self, s: Session, previous: str) -> None:
        """Ask ``previous`` for the state."""
        self.send_to(previous, {"k": "req", "s": s.id, "e": s.epoch, "o": self.host.name},
                     oob=self.out_of_band)

    def _on_req(self, link: str, body: dict[str, Any]) -> None:
        self.hand_over(_sid(body), get(body, "o", str), get(body, "e", int))

    def hand_over(self, sid: str, to: str, epoch: int, fold: bool = False,
                  waited: float = 0.0) -> None:
        """Send the state of ``sid`` to ``to`` (or say it is not here); ``fold``: ``to``
        holds the session already, and takes the rows of this copy into it."""
        table = self.host.sessions
        cur = table.sessions.get(sid)
        if cur is not None and cur.state == "arriving" and cur.epoch < epoch:
            # a newer requester wants the newest state, the one still arriving here --
            # not an older copy kept here for an older requester (seed 105 of the
            # flooding simulator: that copy went to the newest broker and the arriving
            # one, with rows held meanwhile, stayed behind unasked)
            self._waiting.setdefault(sid, []).append((to, epoch))
            return
        rival = cur is not None and not fold and cur.link in self.host.clients \
            and self.overlay.rivals(cur.epoch, epoch)
        if cur is not None:
            cur.draining = not rival and not fold and cur.epoch < epoch \
                and cur.state == "attached" and cur.link in self.host.clients \
                and cur.sent > cur.acked and waited < DRAIN_TIMEOUT
            if cur.draining:
                # taken from a process still connected here (a rival's next round):
                # rows sent to it are its own once it acknowledges them -- sent on,
                # they reached both processes (issue 30 item 2, 1 run in 7); nothing
                # more is sent to it meanwhile, and what it leaves unacknowledged
                # within DRAIN_TIMEOUT goes over too (twice, never lost)
                step = self.policy.ping_interval
                self.host.call_later(step, lambda: self.hand_over(
                    sid, to, epoch, fold, waited + step))
                return
        state = None if rival else table.release(sid, to, epoch)
        if state is None:
            gone = table.moved.get(sid)
            nack: dict[str, Any] = {"k": "nack", "s": sid, "e": epoch,
                                    "moved": gone[0] if gone and gone[0] != to else None}
            if gone and gone[:2] == (to, epoch):
                nack["folded"] = 1  # into the requester itself: see :meth:`_on_nack`
            cur = table.sessions.get(sid)
            if cur is not None and (rival or cur.epoch >= epoch):
                # claimed here with a newer epoch, or a rival one whose process is
                # connected here: two claims numbered from one epoch (two processes
                # with the same state, slow links) must not both stand, nor may a
                # stale "moved" send the requester round in circles (issue 30 item
                # 2): it is told the epoch held here and settles it (superseded)
                nack.update(moved=None, held=cur.epoch, at=self.host.name)
            self.send_to(to, nack, oob=self.out_of_band)
            return
        self.after_release(sid, state)
        if fold:
            state["fold"] = 1
        chunks = state.pop("chunks")
        parts: list[list[Any]] = [[]]
        size = 0
        for c in chunks:
            if size > PART_BYTES:
                parts.append([])
                size = 0
            parts[-1].append(c)
            size += len(c.get("k", b"")) + 64 * len(c.get("p", ()))
        for i, part in enumerate(parts):
            body: dict[str, Any] = {"k": "xfer", "s": sid, "e": epoch, "chunks": part}
            if i == len(parts) - 1:
                body["state"] = state
            self.send_to(to, body, oob=self.out_of_band)

    def after_release(self, sid: str, state: dict[str, Any]) -> None:
        """The old broker's teardown once the state is gone: the profiles still
        registered here for the released incarnation leave (the path protocols have
        already moved them), and so do its advertisements (after the probe)."""
        link = "@" + sid
        tag = state.get("tag")
        cur = self.host.sessions.sessions.get(sid)
        routing = self.host.routing
        if cur is None or cur.tag != tag:
            # every older incarnation's gids go, not only the released one's: a copy
            # that came back here and left again may have left gids of an earlier tag
            # (seed 4294967295 of the rendezvous handoff); the current one's stay
            keep = None if cur is None else f"{SESSION_PREFIX}{sid}/{cur.tag}/"
            for e in routing.table.entries_from(link):
                if e.id.startswith(f"{SESSION_PREFIX}{sid}/") \
                        and (keep is None or not e.id.startswith(keep)):
                    routing.unsubscribe(link, e.id)
            if cur is None and self.host.store is not None:
                self.host.store.delete_client(sid)
        adverts = [a for a in routing.table.adverts_from(link)
                   if not a.startswith(f"{SESSION_PREFIX}{sid}/{cur.epoch}/")] \
            if cur is not None else routing.table.adverts_from(link)
        if adverts:
            if sid in self._probed or not routing.table.advertisements:
                self._probed.discard(sid)
                for gid in adverts:
                    routing.unadvertise(link, gid)
            else:
                self._kept_adverts[sid] = adverts

    # ---- the new broker's side -------------------------------------------------------------------

    def _on_xfer(self, link: str, body: dict[str, Any]) -> None:
        sid = _sid(body)
        s = self.host.sessions.sessions.get(sid)
        key = f"{sid}/{body.get('e')}"
        parts = self._parts.setdefault(key, [])
        parts.extend(get(body, "chunks", list))
        if "state" not in body:
            return
        state = get(body, "state", dict)
        state["chunks"] = self._parts.pop(key)
        if state.get("fold"):
            # a losing claim's rows (:meth:`superseded`): numbered here, never dropped;
            # passed on if the session went on meanwhile
            gone = self.host.sessions.moved.get(sid)
            if s is not None and s.epoch >= get(body, "e", int):
                self.host.sessions.fold(s, state["chunks"])
                return
            if s is None and gone is not None and gone[0] != self.host.name:
                self.send_to(gone[0], {"k": "xfer", "s": sid, "e": gone[1],
                                       "chunks": state.pop("chunks"), "state": state},
                             oob=self.out_of_band)
                return
        if s is None or s.state != "arriving" or s.epoch != body.get("e"):
            log.warning("%s: a transfer of session %s nobody waits for", self.host.name, sid)
            return
        self.finish(s, state)

    def finish(self, s: Session, state: dict[str, Any] | None) -> None:
        """The state is here (or will not come)."""
        self.host.sessions.establish(s, state)

    def moved_on(self, body: dict[str, Any]) -> tuple[Session, str] | None:
        """For a ``nack`` saying the session went on to a known broker: the arriving
        session it answers and that broker."""
        s = self.host.sessions.sessions.get(_sid(body))
        moved = body.get("moved")
        if s is not None and s.state == "arriving" and s.epoch == body.get("e") \
                and isinstance(moved, str) and self.overlay.knows(moved) \
                and moved != self.host.name:
            return s, moved
        return None

    def _on_nack(self, link: str, body: dict[str, Any]) -> None:
        s = self.host.sessions.sessions.get(_sid(body))
        held, at = body.get("held"), body.get("at")
        if s is not None and s.state == "arriving" and s.epoch == body.get("e") \
                and type(held) is int and isinstance(at, str) \
                and (held >= s.epoch or self.overlay.rivals(held, s.epoch)) \
                and self.overlay.knows(at) and at != self.host.name:
            self.superseded(s, held, at)
            return
        on = self.moved_on(body)
        if on is not None:
            self.begin(*on)
            return
        s = self.host.sessions.sessions.get(_sid(body))
        if s is not None and s.state == "arriving" and s.epoch == body.get("e"):
            if body.get("folded"):
                # the copy asked was itself arriving and lost to this claim: its rows
                # came here, the state it waited for is elsewhere (issue 30 item 2,
                # seed 302: this claim started empty and an older one took the state)
                self.locate(s)
                return
            self.finish(s, None)

    def superseded(self, s: Session, held: int, at: str, yielding: bool = False) -> None:
        """Broker ``at`` claims the session arriving here, with epoch ``held`` -- a
        rival of ours (two processes reconnected with the same state: the same round,
        :mod:`.overlay`) or a newer one (ours is stale) -- so the holder had nothing to
        give us, or ``at`` keeps it for its connected process (issue 30 item 2).
        Before, this copy started empty, or asked round a loop of stale "moved" answers
        until it timed out, and the rows held here for it reached nobody.

        Against a rival a client still connected here supersedes the other claim in
        the next round and fetches the state from ``at`` (the process there, if any,
        is told ``SessionMoved``). Otherwise this claim lost: the rows held for it go
        to ``at`` and are numbered there (:meth:`SessionTable.fold
        <siftbus.broker.session_table.SessionTable.fold>`), its client if still
        connected is told ``SessionMoved``, and its profiles here follow the session
        (:meth:`after_release`). ``yielding``: a locating claim that met a newer one
        (:mod:`.locate_order`) loses whatever its client does."""
        if not yielding and self.overlay.rivals(held, s.epoch) and s.link in self.host.clients:
            s.epoch = self.overlay.next_epoch(max(held, s.epoch))
            self.claim(s)
            self.begin(s, at)
            return
        log.info("%s: session %s is claimed at %s (epoch %d): its rows go there",
                 self.host.name, s.id, at, held)
        table = self.host.sessions
        table.counts["duplicates_dropped"] += s.merge_pending(Seen())
        s.state = "away"
        s.epoch = min(s.epoch, held - 1)  # the older copy of the two from now on
        if not s.probing:
            table.replay(s)  # what its client published meanwhile goes out first
        self.hand_over(s.id, at, held, fold=True)
        for to, epoch in self._waiting.pop(s.id, []):
            self.hand_over(s.id, to, epoch)  # told where it went

    # ---- locating a session ----------------------------------------------------------------------

    def locate(self, s: Session) -> None:
        """Find the newest holder of ``s`` with an echo wave over the tree."""
        lid = f"{self.host.name}:{next(self._lids)}"
        best = locate_order.older_copy(self, s.id, s.epoch)
        self._locates.start(lid, s.id, (best, None),
                            {"k": "loc", "l": lid, "s": s.id, "e": s.epoch,
                             "o": self.host.name})

    def profiles_of(self, s: Session) -> list[Any]:
        """The profiles of a session held here under its client's ids (wire form)."""
        if s.profiles is not None and s.state == "arriving":
            profiles = list(s.profiles.values())
        else:
            prefix = f"{SESSION_PREFIX}{s.id}/{s.tag}/"
            profiles = [e.profile.with_id(e.local_id, s.id)
                        for e in self.host.routing.table.entries_from(s.link)
                        if e.id.startswith(prefix) and "#" not in e.id]
        return [encode_profile(p) for p in profiles]

    def _on_locate(self, link: str, body: dict[str, Any]) -> None:
        sid, before = _sid(body), get(body, "e", int)
        self._locates.visit(link, get(body, "l", str), sid, lambda parent: (
            locate_order.older_copy(self, sid, before),
            locate_order.newer_copy(self, sid, before)), body)

    def _on_echo(self, link: str, body: dict[str, Any]) -> None:
        self._locates.answer(link, get(body, "l", str), (body.get("best"), body.get("newer")))

    def _located(self, lid: str, st: Wave) -> None:
        s = self.host.sessions.sessions.get(st.key)
        if s is None or s.state != "arriving":
            return
        best, newer = st.value
        act = locate_order.deferral(s, best, newer, self.host.clients)
        if act is not None and self.overlay.knows(newer[1]):
            # a newer claim of the session (:mod:`.locate_order`): this older one
            # yields to it, or its live process takes a copy left without one
            if act == "yield":
                self.superseded(s, newer[0], newer[1], yielding=True)
                return
            best = newer[:4]
        if best is None:
            s.profiles = s.profiles or {}
            self.host.sessions.establish(s, None, outcome="new")
            return
        if best[3] is None and s.profiles is None:
            # the newest holder is still locating and knows no profiles yet: ask again
            # shortly (the oldest such copy finds a holder that knows them, so this
            # ends; the handoff's time-out bounds it)
            self.host.call_later(self.policy.ping_interval, lambda: self._relocate(s))
            return
        if s.epoch <= int(best[0]):
            s.epoch = self.overlay.next_epoch(int(best[0]))
        s.tag = int(best[2])
        if s.profiles is None:
            s.profiles = {p.id: p for p in (
                decode_profile(x, self.host.schema, None) for x in best[3])}
        if best[1] == self.host.name:  # an old state of it is kept here
            self.hand_over(s.id, self.host.name, s.epoch)
        else:
            self._probe(s, str(best[1]))
            self.begin(s, str(best[1]))

    def _relocate(self, s: Session) -> None:
        if self.host.sessions.sessions.get(s.id) is s and s.state == "arriving":
            self.locate(s)

    # ---- publishers (advertisement mode) ---------------------------------------------------------

    def _advertise(self, s: Session, req: SessionRequest) -> None:
        """Advertise what the arriving client publishes; in advertisement mode probe the
        path to its old broker before it may publish here."""
        routing = self.host.routing
        for p in req.adverts:
            routing.advertise(s.link, p.with_id(advert_gid(s.id, s.epoch, p.id), s.id))
        s.probing = bool(req.adverts) and routing.table.advertisements

    def _probe(self, s: Session, previous: str) -> None:
        """Probe the path to the old broker behind the new advertisements (its
        requests wait meanwhile)."""
        if s.probing:
            self.send_to(previous, {"k": "probe", "s": s.id, "e": s.epoch,
                                    "o": self.host.name})

    def _on_probe(self, link: str, body: dict[str, Any]) -> None:
        sid = _sid(body)
        kept = self._kept_adverts.pop(sid, None)
        routing = self.host.routing
        if kept is not None:
            for gid in kept:
                if gid in routing.table.adverts_from("@" + sid):
                    routing.unadvertise("@" + sid, gid)
        else:
            self._probed.add(sid)
        self.send_to(get(body, "o", str), {"k": "pecho", "s": sid, "e": body.get("e")})

    def _on_pecho(self, link: str, body: dict[str, Any]) -> None:
        s = self.host.sessions.sessions.get(_sid(body))
        if s is None or s.epoch != body.get("e") or not s.probing:
            return
        s.probing = False
        if s.state != "arriving":
            self.host.sessions.replay(s)

    # ---- helpers ---------------------------------------------------------------------------------

    def session_profiles(self, s: Session, tag: int) -> list[tuple[Profile, str]]:
        """The session's profiles under their gids of ``tag``, with the client's ids."""
        assert s.profiles is not None
        return [(p.with_id(session_gid(s.id, tag, pid), s.id), pid)
                for pid, p in s.profiles.items()]

    def store_profiles(self, s: Session, tag: int) -> None:
        """Keep the session's profiles in this broker's store (they are local now)."""
        store = self.host.store
        if store is None or s.profiles is None:
            return
        store.delete_client(s.id)
        for p in s.profiles.values():
            store.put(s.id, p)


def advert_gid(sid: str, epoch: int, aid: str) -> str:
    """The network-wide id of an advertisement of a session client (per attachment, so an
    old one still travelling never clashes with the new one)."""
    return f"{SESSION_PREFIX}{sid}/{epoch}/{aid}"


def _sid(body: dict[str, Any]) -> str:
    return str(get(body, "s", str, where="HANDOFF"))


def check_claims(handoff: str, protocol: str, strategy: str) -> None:
    """Refuse combinations a handoff cannot work with at all."""
    if handoff == "rendezvous" and protocol != "rendezvous":
        raise ConfigError("handoff = \"rendezvous\" needs protocol = \"rendezvous\" (the "
                          "handoff travels toward each type's rendezvous node)",
                          field="handoff")
    if strategy == "merging" and handoff in ("acyclic", "rendezvous"):
        raise ConfigError(f"handoff = \"{handoff}\" cannot follow profiles that merging "
                          "hides in merged ones; use strategy = \"covering\"",
                          field="handoff")


__all__ = ["PART_BYTES", "HandoffBase", "HandoffHost", "Overlay", "advert_gid",
           "check_claims"]
