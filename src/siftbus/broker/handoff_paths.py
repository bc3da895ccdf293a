"""The two path handoffs of Tarkoma's chapter 5: the acyclic graph and the rendezvous point.

**Acyclic graph** (§5.5.2, :class:`AcyclicGraph`). The session's profiles keep their gids
wherever the session goes. The new broker ``b`` makes them its own and sends ``move``
toward the old broker ``a`` along the tree; every broker on the way makes them come from
the neighbour toward ``b`` (:meth:`Routing.relocate
<siftbus.broker.protocols.Routing.relocate>`: one atomic step, the forwarding table
computes what each neighbour must hold now). That is the thesis's "activate the path
from ``b`` to the junction, tear down the rest": off the path nothing changes, since
from there ``a`` and ``b`` lie in the same direction, and where covering already routes
the events toward ``b`` the step changes nothing but the direction. When ``move``
reaches ``a`` the profiles no longer lead there: ``a`` hands the buffer over (``xfer``,
along the same path, so it arrives behind every notification ``a``'s old routes sent
toward ``b``). Cost: one ``move`` and one ``xfer`` per hop, ``2 d(a, b)`` messages.

A neighbour whose view of a profile the step changes is told with a ``move`` too (the
profile may be held there from elsewhere: it must be redirected, not added). Moves of one
session carry its epoch; a broker applies a move only if it is at least as new as the
last it applied, and answers an older one with a correction carrying the newer epoch
(routing events for the gids it refused toward the sender until the sender acknowledges
the correction with ``mack``: it may have withdrawn what they cover), so
crossing moves (a client moving again before its last handoff ended, or back) leave every
profile pointing toward the newest access broker. An old broker reached by a move stripped
of its items (it passed a broker where a newer move had been applied) redirects the
profiles still registered there toward the new holder with ``rd``, which travels on as
long as the next broker still holds them from the previous one.

**Rendezvous point** (§5.6, :class:`RendezvousPoint`). With rendezvous routing the new
broker subscribes the profiles anew (gids of a new tag), which travel toward each type's
rendezvous node, and sends ``update`` behind them. The update stops at the rendezvous
node or at the first broker where a *complete* subscription covers the profile
(completeness checking: a profile is complete at a broker once an update for it reached
a stop and the ``complete`` answer passed back through that broker; the session's old
subscription, complete up to the rendezvous node, is such a stop). ``complete`` goes back
to ``b``; then ``b`` asks ``a`` for the state (``req``), ``a`` sends it and unsubscribes
the old gids. When ``b`` itself already holds a complete covering subscription, nothing
travels before ``req`` (the covering optimisation). Cost: ``d(b, stop)`` twice plus the
transfer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from siftbus.covering.forwarding import Update
from siftbus.covering.relations import covers
from siftbus.model import Profile
from siftbus.wire.frames import get
from siftbus.wire.profiles import decode_profile, encode_profile

from .handoff_base import HandoffBase, HandoffHost
from .protocols import RendezvousNodes, gid_session
from .sessions import SESSION_PREFIX, Session, SessionPolicy


class AcyclicGraph(HandoffBase):
    """Tarkoma's acyclic-graph subscriber handoff (see the module docstring)."""

    name = "acyclic"
    # every routing protocol: checked with moving subscribers and publishers under
    # flooding, forwarding (each strategy but merging, with and without
    # advertisements) and rendezvous routing (tests/broker/test_mobility_sim.py)
    claims = frozenset({"flooding", "forwarding", "rendezvous"})

    def __init__(self, host: HandoffHost, edges: Iterable[tuple[str, str]],
                 policy: SessionPolicy) -> None:
        super().__init__(host, edges, policy)
        self.epochs: dict[str, int] = {}
        """Per session, the newest move applied here (or attachment claimed here)."""
        self._held: dict[str, tuple[list[Profile], set[str]]] = {}
        """Per neighbour awaiting our correction's ``mack``: the gids we refused, and
        its UNSUBs of profiles they cover, held back until then (:meth:`_hold`)."""
        self.views: dict[str, int] = {}
        """Per session, the newest move whose routes this broker's table reflects (a
        claimed attachment still locating its session has no view yet: seed 37)."""
        self.handlers["move"] = self._on_move
        self.handlers["rd"] = self._on_redirect
        self.handlers["mack"] = self._on_mack
        self.hop_kinds.update({"move", "rd", "mack"})

    def claim(self, s: Session) -> None:
        self.epochs[s.id] = max(self.epochs.get(s.id, 0), s.epoch)

    def session_epoch(self, sid: str) -> int | None:
        return self.views.get(sid, 0)

    def accepts(self, z: str, gid: str, epochs: Any, subscribe: bool = True) -> bool:
        """A plain SUB or UNSUB of a session's profile from a neighbour whose newest
        move of that session is older than ours is a stale view (it uncovered the
        profile before the move reached it): it is not applied, and the neighbour is
        corrected with a move of our epoch saying whether we give it the profile
        (seed 282: a stale SUB travelled three hops behind a move and pointed the
        profile back toward an old broker). A SUB or UNSUB from the neighbour we hold
        the profile from is its own business."""
        held = self._held.get(z)
        if held is not None and self._hold(z, gid, held, subscribe):
            return False
        sid = gid_session(gid)
        if sid is None:
            return True
        mine = self.views.get(sid, 0)
        theirs = epochs.get(sid, 0) if isinstance(epochs, dict) else 0
        table = self.host.routing.table
        e = table.entries.get(gid)
        if subscribe and isinstance(theirs, int) and theirs > mine and e is not None \
                and e.src != z and not e.src.startswith("@"):
            # a newer attachment's plain SUB of a gid we hold from elsewhere (seed 356:
            # its move went the other way and never passes here): taken as its move
            self._step(sid, theirs, z, [(e.profile, True)], None, z)
            return False
        if not isinstance(theirs, int) or mine <= theirs:
            return True
        if e is not None and e.src == z:
            return True
        ours = next((p for p in table.exported(z) if p.id == gid), None)
        if ours is not None or e is not None:
            p = ours if ours is not None else e.profile  # type: ignore[union-attr]
            if subscribe and self.host.routing.toward(p) is None:
                # the neighbour takes it as held here, and may stop sending what it
                # covers (seed 250 with 120 actions: the profile stood in for an equal
                # one of another session, whose move had just withdrawn it): events
                # for it still go that way until the newer move's transfer passes
                # back from there, behind whatever the move uncovered beyond
                self.host.routing.keep_route(sid, z, p)
            self.send(z, {"k": "move", "s": sid, "e": mine, "o": self.host.name,
                          "items": [[encode_profile(p), ours is not None]]})
        return False

    def _hold(self, z: str, gid: str, held: tuple[list[Profile], set[str]],
              subscribe: bool) -> bool:
        """While ``z`` has not acknowledged a correction refusing gids it gave us
        (``mack``), its UNSUB of a profile they cover is held back: it withdrew it
        trusting the refused gid, and passed on, the withdrawal would cut the routes of
        brokers behind us (seed 498 with 120 actions). A SUB of it meanwhile cancels
        the held UNSUB (we still hold it). Whether the message is left out now."""
        refused, later = held
        if gid in later:
            if subscribe:
                later.discard(gid)
            return True
        if subscribe or gid_session(gid) is not None:
            return False  # a session's gids follow its moves and their corrections
        e = self.host.routing.table.entries.get(gid)
        if e is None or e.src != z or not any(covers(p, e.profile) for p in refused):
            return False
        later.add(gid)
        return True

    def begin(self, s: Session, previous: str) -> None:
        self.epochs[s.id] = max(self.epochs.get(s.id, 0), s.epoch)
        if self.views.get(s.id, 0) > s.epoch:
            # a newer attachment's move passed here while this one was locating (seed
            # 250 at tell=0.5): the profiles already lead toward it, and pulling them
            # back here would cut the routes of profiles they cover. Only the request
            # goes on, stripped like any older move, and the state is passed on to the
            # newer attachment once it is here
            self.send(self.overlay.next_hop(previous),
                      {"k": "move", "s": s.id, "e": s.epoch, "o": self.host.name,
                       "items": [], "to": previous})
            return
        local = {p.id: pid for p, pid in self.session_profiles(s, s.tag)}
        items = [(p, True) for p, _ in self.session_profiles(s, s.tag)]
        self.store_profiles(s, s.tag)
        routing = self.host.routing
        back = self.overlay.next_hop(previous)
        for p, _ in items:
            e = routing.table.entries.get(p.id)
            if (e is None or e.src.startswith("@")) and routing.toward(p) is None:
                # events published here for profiles the moving one covered must still
                # go toward the old broker until what the move uncovers there arrives,
                # i.e. until the transfer passes back (seed 21 with 120 actions: a
                # publisher arrived here with the session; under advertisements no
                # route to keep existed here, and a static subscriber lost a row)
                routing.keep_route(s.id, back, p)
        self._step(s.id, s.epoch, s.link, items, previous, self.host.name, local)

    def _step(self, sid: str, epoch: int, w: str, items: list[tuple[Profile, bool]],
              to: str | None, origin: str, local: dict[str, str] | None = None) -> None:
        """Apply one relocation step and send what it implies.

        Each item ``(profile, held)`` says what ``w`` gives us now: the gid comes from
        ``w`` (``held``) or from nobody (any entry of it here goes). Every neighbour whose
        view of a gid changes -- those the table would send it to or withdraw it from, and
        the neighbour it came from before -- is told with a ``move`` in turn (it may hold
        the gid from elsewhere, so a plain SUB or UNSUB would not do); the ``move`` toward
        ``to`` carries every gid, as our view has it."""
        self.views[sid] = max(self.views.get(sid, 0), epoch)
        routing = self.host.routing
        table = routing.table
        rel: list[tuple[Profile, str | None, bool]] = []
        olds: dict[str, str] = {}
        for p, held in items:
            e = table.entries.get(p.id)
            if e is not None:
                olds[p.id] = e.src
            if held:
                rel.append((p, (local or {}).get(p.id), True))
            elif e is not None:
                rel.append((p, None, False))
        updates = routing.relocate(w, rel)
        profiles = {p.id: p for p, _ in items}
        for gid, u0 in olds.items():
            # events for profiles this gid covered beyond u0 must still reach u0 until
            # they are uncovered toward us: until the transfer passes back from there
            if u0 != w and not u0.startswith("@"):
                routing.keep_route(sid, u0, profiles[gid])
        tell: dict[str, dict[str, bool]] = {}
        clean: dict[str, Update] = {}
        for z, u in updates.items():
            for p in u.subscribe:
                if p.id in profiles and z != w:
                    tell.setdefault(z, {})[p.id] = True
            for p in u.unsubscribe:
                if p.id in profiles and z != w:
                    tell.setdefault(z, {})[p.id] = False
            clean[z] = Update(tuple(p for p in u.subscribe if p.id not in profiles),
                              tuple(p for p in u.unsubscribe if p.id not in profiles),
                              u.advertise, u.unadvertise)
        me = self.host.name
        nxt = self.overlay.next_hop(to) if to is not None and to != me else None
        views: dict[str, set[str]] = {}

        def exported(z: str) -> set[str]:
            if z not in views:
                views[z] = {p.id for p in table.exported(z)} if z in table.neighbours \
                    else set()
            return views[z]

        for gid, u0 in olds.items():  # the old source must learn where the gid went
            if u0 != w and not u0.startswith("@") and gid not in tell.get(u0, {}):
                tell.setdefault(u0, {})[gid] = gid in exported(u0)
        if nxt is not None:
            told = tell.setdefault(nxt, {})
            for gid in profiles:
                if gid not in told:
                    told[gid] = gid in exported(nxt)
        first, last = routing.update_messages(clean)
        for z, msg in first:
            self.host.send(z, msg)
        for z, told in tell.items():
            body: dict[str, Any] = {"k": "move", "s": sid, "e": epoch, "o": origin,
                                    "items": [[encode_profile(profiles[g]), h]
                                              for g, h in told.items()]}
            if z == nxt:
                body["to"] = to
            self.send(z, body)
        for z, msg in last:
            self.host.send(z, msg)

    def after_release(self, sid: str, state: dict[str, Any]) -> None:
        """Profiles of the released incarnation still registered here (a move reached
        us stripped of its items: it passed a broker where a newer attachment of the
        session is still locating it) are redirected toward the new holder, not torn
        down: torn down, nothing would route their events until the newer attachment's
        move arrived here (seed 99999). A newer attachment corrects the direction with
        its own move, which follows the old sources here. Only where profiles may
        travel any way (profile forwarding): under flooding events reach every broker
        anyway, and under rendezvous routing they travel toward the rendezvous node.

        The redirect travels on toward the new holder (``rd``, :meth:`_on_redirect`):
        the neighbour it now comes from may still hold it from us, as the stripped move
        left its view, and a newer move need not pass there (seed 244 at tell=0.5: a
        loop between two brokers that outlived the unsubscription)."""
        table = self.host.sessions
        moved = table.moved.get(sid)
        cur = table.sessions.get(sid)
        tag = state.get("tag")
        if moved is not None and moved[0] != self.host.name \
                and (cur is None or cur.tag != tag):
            prefix = f"{SESSION_PREFIX}{sid}/{tag}/"
            routing = self.host.routing
            w = self.overlay.next_hop(moved[0])
            # those the new holder's side held from us keep routing there; those it
            # did not (covered by one that does) simply go -- redirected, they would
            # stay behind once the covering one is corrected (seed 150279)
            sent = {p.id for p in routing.table.exported(w)} \
                if w in routing.table.neighbours else set()
            left = [(e.profile, e.id in sent) for e in routing.table.entries_from("@" + sid)
                    if e.id.startswith(prefix) and routing.toward(e.profile) is None]
            if left:
                self._step(sid, moved[1], w, left, None, self.host.name)
                self._redirect(sid, moved[1], w, moved[0], [p for p, held in left if held])
        super().after_release(sid, state)

    def _redirect(self, sid: str, epoch: int, w: str, to: str, held: list[Profile]) -> None:
        """Tell ``w`` that we hold ``held`` from it now (redirected toward ``to``)."""
        if held:
            self.send(w, {"k": "rd", "s": sid, "e": epoch, "o": self.host.name, "to": to,
                          "items": [encode_profile(p) for p in held]})

    def _on_redirect(self, w: str, body: dict[str, Any]) -> None:
        """``w`` redirected the listed gids toward the session's new holder ``to``: it
        holds them from us now. Where we hold one from ``w`` (our view still points
        toward the old holder: the stripped move passed here and changed nothing), it
        is redirected here too, toward ``to``, and the redirect travels on; its old
        source ``w`` learns whether we give it the gid (:meth:`_step` tells it). Where
        we do not, or a newer move passed here, ``w`` is told what we give it, as to the
        sender of any stale move."""
        sid = str(get(body, "s", str))
        epoch = get(body, "e", int)
        to = str(get(body, "to", str))
        origin = get(body, "o", str)
        items = [decode_profile(x, self.host.schema, None) for x in get(body, "items", list)]
        routing = self.host.routing
        table = routing.table
        mine = self.views.get(sid, 0)
        me = self.host.name
        loop = [p for p in items if mine <= epoch and to != me
                and (e := table.entries.get(p.id)) is not None and e.src == w]
        rest = [p for p in items if p not in loop]
        if rest:
            exported = {p.id for p in table.exported(w)} if w in table.neighbours \
                else set()
            wrong = [p for p in rest if p.id not in exported or mine > epoch]
            if wrong:
                self.send(w, {"k": "move", "s": sid, "e": max(mine, epoch), "o": me,
                              "items": [[encode_profile(p), p.id in exported]
                                        for p in wrong]})
        if loop:
            y = self.overlay.next_hop(to)
            sent = {p.id for p in table.exported(y)} if y in table.neighbours else set()
            step = [(p, p.id in sent) for p in loop]
            self._step(sid, epoch, y, step, None, origin)
            self._redirect(sid, epoch, y, to, [p for p, held in step if held])

    def receive(self, link: str, body: dict[str, Any]) -> None:
        if body.get("k") in ("xfer", "nack") and "s" in body and link != self.host.name:
            # everything beyond ``link`` has redirected the session's profiles and sent
            # us what they uncovered: the routes kept toward it may go
            self.host.routing.drop_routes(str(body["s"]), link)
        super().receive(link, body)

    def _on_move(self, w: str, body: dict[str, Any]) -> None:
        sid = str(get(body, "s", str))
        epoch = get(body, "e", int)
        origin = get(body, "o", str)
        to = body.get("to")
        to = str(to) if to is not None else None
        items = [(decode_profile(x[0], self.host.schema, None), bool(x[1]))
                 for x in get(body, "items", list)]
        routing = self.host.routing
        s = self.host.sessions.sessions.get(sid)
        # an attachment still locating its session has no profiles and no view of its
        # own yet: moves are judged by the view its table reflects, never by its claim
        # (seed 36 at tell=0.5: it claimed an older copy's leftover profiles with its
        # new epoch and took them from the holder it was about to locate)
        locating = s is not None and _locating(s)
        extra: list[tuple[Profile, bool]] = []
        mine = self.views.get(sid, 0) if locating else self.epochs.get(sid, 0)
        if s is not None and not locating and items and (s.epoch >= epoch or (
                s.state != "arriving" and s.link in self.host.clients
                and self.overlay.rivals(s.epoch, epoch))):
            # the session's newest attachment is here: its profiles registered by the
            # client stay, whatever a move of no newer epoch says (such a move only
            # echoes a stale view, seed 68); the sender learns what we give it. So do
            # they against a rival claim, which :meth:`hand_over` refuses while the
            # process is connected here (the rival claims again in the next round):
            # taken, the session stayed here without them, and a claim that took it
            # over from here was told it had no profiles (issue 30 item 2)
            link = s.link
            registered = {e.id for e in routing.table.entries_from(link)}
            ours = [p for p, _ in items if p.id in registered]
            if ours:
                items = [(p, h) for p, h in items if p.id not in registered]
                exported = {p.id for p in routing.table.exported(w)}
                self.send(w, {"k": "move", "s": sid, "e": max(mine, epoch),
                              "o": self.host.name,
                              "items": [[encode_profile(p), p.id in exported] for p in ours]})
        elif s is not None and epoch >= mine and items:
            # an older copy of the session is kept here and a newer move takes some of
            # its profiles away: all of them go in the same step. Left behind, the rest
            # would match rows here with part of the client's profile ids, and the new
            # holder drops its own copy of such a row as one the old broker had seen
            # (seed 132: identical profiles, of which only one travels)
            local = {e.id: e.profile for e in routing.table.entries_from(s.link)}
            if any(p.id in local for p, _ in items):
                named = {p.id for p, _ in items}
                extra = [(p, False) for g, p in local.items() if g not in named]
                items += extra
        if epoch >= mine:
            self.epochs[sid] = max(self.epochs.get(sid, 0), epoch)
            self._step(sid, epoch, w, items, to, origin)
            if extra and w in routing.table.neighbours:
                # the sender did not name them (covered on its side, it never held
                # them from us): it learns where they went like any other neighbour,
                # else it keeps them from us for good (seed 42 of acyclic under
                # rendezvous routing, fresh=0.6, tell=0.5)
                sent = {p.id for p in routing.table.exported(w)}
                self.send(w, {"k": "move", "s": sid, "e": epoch, "o": self.host.name,
                              "items": [[encode_profile(p), p.id in sent]
                                        for p, _ in extra]})
        else:  # an older move: correct the sender, pass the request on
            exported = {p.id for p in routing.table.exported(w)}
            corr = [[encode_profile(p), p.id in exported] for p, _ in items]
            refused = [p for p, held in items if held and (
                (e := routing.table.entries.get(p.id)) is None or e.src != w)]
            if corr:
                body_c: dict[str, Any] = {"k": "move", "s": sid, "e": mine,
                                          "o": self.host.name, "items": corr}
                if refused and routing.toward(refused[0]) is None:
                    # the sender takes these as given to us, and may have withdrawn the
                    # profiles they cover (seed 172 with 120 actions: a static
                    # subscriber's, uncovered by nobody here): until it has taken the
                    # correction in (``mack``), events for them still go its way
                    for p in refused:
                        routing.keep_route(_acked(sid), w, p)
                    self._held.setdefault(w, ([], set()))[0].extend(refused)
                    body_c["ack"] = 1
                self.send(w, body_c)
            if to is not None and to != self.host.name:
                self.send(self.overlay.next_hop(to), {**body, "items": []})
        if to == self.host.name:
            self.hand_over(sid, origin, epoch)
        if body.get("ack"):
            # after the step's SUBs of whatever the correction uncovered here
            self.send(w, {"k": "mack", "s": sid})

    def _on_mack(self, w: str, body: dict[str, Any]) -> None:
        """``w`` took our correction in: the routes kept toward it may go."""
        self.host.routing.drop_routes(_acked(str(get(body, "s", str))), w)
        held = self._held.pop(w, None)
        if held is not None:
            for gid in sorted(held[1]):
                self.host.routing.neighbour_unsubscribe(w, gid)


def _acked(sid: str) -> str:
    """The key of the routes kept until a ``mack`` (not until a transfer passes)."""
    return f"{sid}/ack"


def _locating(s: Session) -> bool:
    """Whether ``s`` is an attachment still locating its session (its profiles and
    the copy it takes over are not known yet)."""
    return s.state == "arriving" and s.profiles is None


class RendezvousPoint(HandoffBase):
    """Tarkoma's rendezvous-point handoff with completeness checking."""

    name = "rendezvous"
    claims = frozenset({"rendezvous"})

    def __init__(self, host: HandoffHost, edges: Iterable[tuple[str, str]],
                 policy: SessionPolicy) -> None:
        super().__init__(host, edges, policy)
        self.complete: set[str] = set()
        """Gids whose subscription is known complete from here to the rendezvous node."""
        self._open: dict[str, tuple[int, set[str], str]] = {}
        """Arriving sessions: id -> (epoch, gids not yet complete, old broker)."""
        self.handlers["update"] = self._on_update
        self.handlers["complete"] = self._on_complete
        self.hop_kinds.update({"update", "complete"})
        self.skipped = 0
        """Handoffs whose profiles were all complete here already (nothing travelled)."""

    def _direction(self, p: Profile) -> str | None:
        routing = self.host.routing
        if isinstance(routing, RendezvousNodes):
            return routing.direction(p.etype.name)
        return None

    def _complete_here(self, p: Profile) -> bool:
        """Whether events for ``p`` reach this broker already: it is the rendezvous
        node, or it holds ``p`` or a covering profile that is complete and came from
        elsewhere than the direction of the rendezvous node."""
        d = self._direction(p)
        if d is None:
            return True
        table = self.host.routing.table
        if p.id in self.complete:
            return True
        node = table.structure.node_of(p.id) if p.id in table else None
        if node is None:  # covered further down: look for a complete coverer here
            return any(g in table.entries and table.entries[g].src != d
                       and covers(table.entries[g].profile, p) for g in self.complete)
        if any(x.id in self.complete and x.src != d and x.id != p.id
               for x in node.entries.values()):
            return True
        return any(x.id in self.complete and x.src != d
                   for n in table.structure.coverers(node) for x in n.entries.values())

    def begin(self, s: Session, previous: str) -> None:
        routing = self.host.routing
        s.tag = s.epoch  # new gids: the old ones stay until the old broker lets go
        for p, pid in self.session_profiles(s, s.tag):
            if p.id not in routing.table:
                routing.subscribe(s.link, p, local_id=pid)
        self.store_profiles(s, s.tag)
        self._go(s, previous)

    def _go(self, s: Session, previous: str) -> None:
        waiting: set[str] = set()
        by_dir: dict[str, list[list[Any]]] = {}
        for p, _ in self.session_profiles(s, s.tag):
            if self._complete_here(p):
                self.complete.add(p.id)
                continue
            d = self._direction(p)
            assert d is not None
            waiting.add(p.id)
            by_dir.setdefault(d, []).append(encode_profile(p))
        self._open[s.id] = (s.epoch, waiting, previous)
        for d, profiles in by_dir.items():
            self.send(d, {"k": "update", "s": s.id, "e": s.epoch, "o": self.host.name,
                          "items": profiles})
        if not waiting:
            self.skipped += 1
            self.request(s, previous)

    def _on_update(self, w: str, body: dict[str, Any]) -> None:
        items = [decode_profile(x, self.host.schema, None) for x in get(body, "items", list)]
        done: list[str] = []
        on: dict[str, list[list[Any]]] = {}
        for p in items:
            if self._complete_here(p):
                done.append(p.id)
            else:
                d = self._direction(p)
                assert d is not None
                on.setdefault(d, []).append(encode_profile(p))
        for d, profiles in on.items():
            self.send(d, {**body, "items": profiles})
        if done:
            self.complete.update(g for g in done if g in self.host.routing.table)
            self.send_to(get(body, "o", str), {"k": "complete", "s": body["s"],
                                               "e": body["e"], "gids": done})

    def _on_complete(self, link: str, body: dict[str, Any]) -> None:
        gids = [str(g) for g in get(body, "gids", list)]
        table = self.host.routing.table
        self.complete.update(g for g in gids if g in table)
        if body.get("to") != self.host.name:
            self.send(self.overlay.next_hop(str(body["to"])), body)
            return
        sid = str(get(body, "s", str))
        st = self._open.get(sid)
        s = self.host.sessions.sessions.get(sid)
        if st is None or s is None or st[0] != body.get("e"):
            return
        st[1].difference_update(gids)
        if not st[1]:
            self.request(s, st[2])

    def established(self, s: Session) -> None:
        self._open.pop(s.id, None)
        self.complete.difference_update(
            g for g in list(self.complete) if g not in self.host.routing.table)
        prefix = f"{SESSION_PREFIX}{s.id}/{s.tag}/"
        self.complete.update(e.id for e in self.host.routing.table.entries_from(s.link)
                             if e.id.startswith(prefix))
        super().established(s)

    def _on_nack(self, link: str, body: dict[str, Any]) -> None:
        on = self.moved_on(body)
        if on is None:
            super()._on_nack(link, body)
            return
        s, moved = on
        self._open[s.id] = (s.epoch, set(), moved)
        self.request(s, moved)


__all__ = ["AcyclicGraph", "RendezvousPoint"]
