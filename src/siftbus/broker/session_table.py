"""The sessions of one broker: attach, detach, buffer, acknowledge, hand over.

:class:`SessionTable` is the broker node's part of :mod:`.sessions`: the node calls it
from small hooks (a client's HELLO with a session, its connection going, a notification
for a session client, an acknowledgement, a request while a handoff runs, a timer) and
it keeps every :class:`~siftbus.broker.sessions.Session` of the broker, its buffer and,
with a store, its durable copy. Moving a session between brokers is the business of the
handoff protocol (:mod:`.handoff`), which calls back :meth:`SessionTable.release` at the
old broker and :meth:`SessionTable.establish` at the new one.

A session client's link is ``@`` + the session id; its profiles have gids
``~id/tag/pid`` (they keep them wherever the session moves, unless a protocol moves by
subscribing anew under a new tag), and what it publishes has the source ``~id/epoch``:
numbered without restart, so rows it publishes twice (after a broker crash) are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from siftbus.errors import ConfigError, SiftbusError, WireError
from siftbus.wire.events import Block, encode_block
from siftbus.wire.frames import Message, MsgType, error_body
from siftbus.wire.profiles import decode_profiles

from .duplicates import Seen
from .session_request import CLAIM_REFUSALS, SessionRequest
from .session_roles import Mover, SessionHost
from .session_store import SessionStore
from .sessions import (
    DEFAULT_POLICY,
    SESSION_PREFIX,
    Chunk,
    Session,
    SessionLimits,
    SessionPolicy,
    unique_pids,
)

log = logging.getLogger("siftbus.broker")

TICK = 1.0
"""Seconds between checks of expiry, row age and handoff time-outs."""

class SessionBusy(ConfigError):
    """A client came back to a broker that still fetches an older state of its session
    (its move before last has not finished): it should connect again shortly."""


class SessionMoved(ConfigError):
    """Another process took the session over at another broker: the client still
    connected here is told so, and the client library ends that connection (it stayed
    connected, answered pings and received nothing)."""


class SessionTable:
    """Every session of one broker node."""

    def __init__(self, host: SessionHost, policy: SessionPolicy = DEFAULT_POLICY,
                 store: SessionStore | None = None) -> None:
        self.host = host
        self.policy = policy
        self.store = store
        self.sessions: dict[str, Session] = {}
        """Sessions held here (attached, away or arriving), by id."""
        self.outgoing: dict[str, Session] = {}
        """Old states kept for a handoff already announced (the client came back here
        after a move and this broker waits to hand its old state on)."""
        self.moved: dict[str, tuple[str, int, float]] = {}
        """Sessions handed over: id -> (new broker, epoch, when)."""
        self.deferred: dict[str, list[Message]] = {}
        self._claims: dict[str, object] = {}  # owner checks running: clients wait for ACK
        self.mover: Mover | None = None
        self.counts = {"handoffs_in": 0, "handoffs_out": 0, "handoffs_failed": 0,
                       "duplicates_dropped": 0, "expired": 0, "resumed": 0}
        self._ticking = False
        if store is not None:
            for s in store.load(host.schema, policy.limits, host.clock()):
                self.sessions[s.id] = s
            if self.sessions:
                self._arm()

    # ---- lookups -------------------------------------------------------------------------

    def of(self, link: str) -> Session | None:
        """The session of a client link (``@id``), if the client has one here."""
        return self.sessions.get(link[1:]) if link.startswith("@") else None

    def gid(self, client: str, pid: str) -> str | None:
        """The gid of a session client's profile, or ``None`` for other clients."""
        s = self.sessions.get(client)
        return None if s is None else session_gid(client, s.tag, pid)

    def publisher_src(self, client: str, blocks: list[Block]) -> str | None:
        """The source stamped on what a session client publishes (``~id/epoch``), and
        the publication numbers it has used (so a restart continues above them)."""
        s = self.sessions.get(client)
        if s is None:
            return None
        for b in blocks:
            if len(b):
                s.pub_seq = max(s.pub_seq, int(b.seq.max()) + 1)
        return f"{SESSION_PREFIX}{client}/{s.epoch}"

    # ---- attach and detach ----------------------------------------------------------------

    def hello(self, link: str, body: Any, owner: str = "",
              refuse: Callable[[str], SiftbusError] | None = None) -> dict[str, Any] | None:
        """A client connected with a session (``body``: the HELLO's ``session`` map);
        returns the status for its ACK.

        On a secured network (``owner``: the client's principal; ``refuse(why)``: the
        counted error that refuses it) a session this broker does not hold is first
        checked with its holders (:mod:`.claims`), and on every network a client that
        knows no epoch (:attr:`SessionRequest.fresh`) waits until the newest copy of
        its session is found (:meth:`Mover.find`; none: a new session): then ``None``
        is returned, and the host's ``session_settled(link, status or error)`` is called
        once the claim is settled -- before it, nothing of the session moves."""
        sid = link[1:]
        req = SessionRequest.parse(body, sid, self.host.schema, self.host.limits)
        limits = (req.limits or self.policy.limits).capped(self.policy.limits)
        s = self.sessions.get(sid)
        if s is not None and req.clean:
            self.end(s, "clean start")
            self.host.forget_client(link)  # connected: end() kept its profiles
            s = None
        if s is not None and req.epoch > s.epoch:
            # the client was attached elsewhere since this state was left here: it is
            # an old state, to be handed on when the newer broker asks for it
            self._set_aside(s)
            s = None
        # a fresh process finds the newest copy first, even with one here: a newer
        # attachment elsewhere may not have asked this broker for it yet
        fresh = req.fresh and self.mover is not None
        if s is not None and not fresh:
            return self._resume(s, req, limits, owner, refuse)
        if not fresh and (not owner or refuse is None or self.mover is None):
            return self._open(link, req, limits, owner)
        assert self.mover is not None
        token = object()
        self._claims[sid] = token
        now: list[tuple[str, Any]] = []  # settled at once (nobody else to ask)

        def settled(verdict: str, newest: list[Any] | None = None) -> None:
            if self._claims.get(sid) is not token:
                return  # the client went (or came again) meanwhile
            del self._claims[sid]
            if not waiting:
                now.append((verdict, newest))
                return
            try:
                self.host.session_settled(link, self._claimed(
                    link, req, limits, owner, refuse, verdict, newest))
            except SiftbusError as exc:
                self.host.session_settled(link, exc)

        waiting = False
        if fresh:  # numbered above the newest copy anywhere before its ACK
            self.mover.find(sid, owner, settled)
        else:
            verdict = self.mover.check(sid, owner, req.previous, settled)
            if verdict is not None:
                settled(verdict)
        waiting = True
        if now:
            return self._claimed(link, req, limits, owner, refuse, *now[0])
        return None

    def _set_aside(self, s: Session) -> None:
        """``s`` is older than the client's attachment: kept for the newer broker to
        fetch (refused while it is itself still arriving)."""
        if s.state == "arriving" or s.id in self.outgoing:
            raise SessionBusy(f"session {s.id} is still arriving at broker "
                              f"{self.host.name} from an earlier move; connect again "
                              "in a moment", field="session_busy")
        self.sessions.pop(s.id)
        self.outgoing[s.id] = s

    def _resume(self, s: Session, req: SessionRequest, limits: SessionLimits, owner: str,
                refuse: Callable[[str], SiftbusError] | None) -> dict[str, Any]:
        """The client is back where its newest copy is: resume from its ``ack``."""
        if owner and s.principal and s.principal != owner and refuse is not None:
            # the name binding let the client in, yet the state says another owner (a
            # binding lost with a store replaced): the state's owner is the authority
            raise refuse(CLAIM_REFUSALS["deny"])
        s.state = "attached" if s.state != "arriving" else "arriving"
        s.away_since = None
        s.limits = limits
        if owner and not s.principal:  # an unrecorded owner: the name binding vouched
            s.principal = owner
        if s.state == "attached":
            self.counts["resumed"] += 1
            s.sent = s.acked
            if req.ack is not None and req.ack > s.acked:
                s.ack(req.ack)
                if self.store is not None:
                    self.store.trim(s)
            if self.mover is not None:
                self.mover.on_back(s)
            self.flush(s)
        return self._status(s, s.state)

    def _status(self, s: Session, state: str,
                profiles: list[Any] | None = None) -> dict[str, Any]:
        """The status a client is told when it attaches or its handoff ends, with the
        session's profiles once they are known here: a client that did not subscribe
        them itself (a reconnect with its state, a fresh process) names them all when it
        moves on -- a move names the profiles the new broker takes over, and one it
        left out was left behind (issue 30: nothing arrived after such a move)."""
        status = {**s.status(), "state": state}
        if profiles is None and self.mover is not None and state != "arriving":
            profiles = self.mover.profiles_of(s)
        if profiles is not None:
            status["profiles"] = profiles
        return status

    def _claimed(self, link: str, req: SessionRequest, limits: SessionLimits, owner: str,
                 refuse: Callable[[str], SiftbusError] | None, verdict: str,
                 newest: list[Any] | None = None) -> dict[str, Any]:
        """Open the session if the owner check (and, for a fresh process, the search for
        its newest copy: ``newest``) let the client have it, else raise."""
        if verdict not in ("ok", "none"):
            why = CLAIM_REFUSALS.get(verdict, CLAIM_REFUSALS["unknown"]).format(
                timeout=self.policy.claim_timeout)
            if refuse is None:  # an open network: no principal to count it against
                raise SessionBusy(f"session {req.id} cannot be had now: {why}",
                                  field="session_busy")
            raise refuse(why)
        here = self.sessions.get(req.id)
        if here is not None and req.fresh:
            if newest is None or newest[1] == self.host.name:
                return self._resume(here, req, limits, owner, refuse)  # the newest
            self._set_aside(here)  # a newer copy is elsewhere
        elif here is not None:
            raise SessionBusy(f"session {req.id} came to broker {self.host.name} while "
                              "its holders were asked; connect again", field="session_busy")
        if not req.fresh:
            return self._open(link, req, limits, owner)
        if newest is None:  # held nowhere: a new session, nothing to fetch
            return self._open(link, req, limits, owner, new=True)
        epoch, holder, tag, wire = newest
        profiles = req.profiles
        if profiles is None and wire is not None:
            profiles = tuple(decode_profiles(wire, self.host.schema, self.host.limits,
                                             what="profiles"))
        # as if the client had moved from the holder with the holder's epoch
        return self._open(link, replace(req, epoch=int(epoch), tag=int(tag),
                                        previous=str(holder), profiles=profiles),
                          limits, owner)

    def cancel_claim(self, link: str) -> None:
        """The client whose claim is being checked went: its verdict is ignored."""
        self._claims.pop(link[1:], None)

    def _open(self, link: str, req: SessionRequest, limits: SessionLimits,
              owner: str, new: bool = False) -> dict[str, Any]:
        """A session this broker does not hold: new (``new``: known to be held nowhere),
        or fetched by the handoff."""
        sid = req.id
        now = self.host.clock()
        if len(self.sessions) >= self.policy.max_sessions:
            raise ConfigError(f"broker {self.host.name} holds {len(self.sessions)} "
                              "sessions, its limit (max_sessions)", field="max_sessions")
        s = Session(sid, limits, now)
        s.principal = owner
        s.away_since = None
        base = max(req.epoch, self._known_epoch(sid))  # unique per broker (overlay)
        s.epoch = base + 1 if self.mover is None else self.mover.next_epoch(base)
        s.pub_seq = int(now * 1e6)  # above what any earlier process of it published
        self.sessions[sid] = s
        if req.clean or self.mover is None or new:
            s.state = "attached"
            s.tag = s.epoch
            if (new or req.clean) and req.ack:  # above what the client has processed
                s.renumber_above(req.ack)
            self._persist_meta(s)
            if self.mover is not None:
                self.mover.on_back(s)  # held here from now on
            return {**s.status(), "state": "new"}
        # it may be held elsewhere: the handoff protocol fetches it (or finds nothing)
        s.state = "arriving"
        s.tag = req.tag
        if req.ack is not None:
            s.acked = req.ack
        s.deadline = now + self.policy.handoff_timeout
        self._arm()
        self.mover.move_in(s, req)
        return {**s.status(), "state": s.state}

    def _known_epoch(self, sid: str) -> int:
        gone = self.moved.get(sid)
        old = self.outgoing.get(sid)
        return max(gone[1] if gone else 0, old.epoch if old else 0)

    def detach(self, link: str) -> bool:
        """A client's connection went; ``True`` if it has a session (its profiles and
        advertisements then stay)."""
        s = self.of(link)
        if s is None:
            return False
        s.away_since = self.host.clock()
        if s.state == "attached":
            s.state = "away"
        s.sent = s.acked
        if s.state == "attached" or (s.state == "away" and not s.probing):
            self.deferred.pop(s.id, None)
        # requests held for an arriving session are still handled once it is here
        self._persist_meta(s)
        if self.mover is not None and s.state == "away":
            self.mover.on_away(s)
        self._arm()
        return True

    def end(self, s: Session, why: str) -> None:
        """Forget a session here (expired, clean start): its rows, profiles, adverts."""
        self.sessions.pop(s.id, None)
        if self.store is not None:
            self.store.delete(s.id)
        if s.link not in self.host.clients:
            self.host.forget_client(s.link)
        log.info("%s: session %s ends (%s)", self.host.name, s.id, why)

    # ---- rows ------------------------------------------------------------------------------------

    def deliver(self, link: str, items: list[tuple[Block, np.ndarray, list[str]]]) -> bool:
        """Take notifications for a session client; ``False`` if ``link`` has none."""
        s = self.of(link)
        if s is None:
            return False
        items = [unique_pids(*x) for x in items]
        now = self.host.clock()
        c = self.host.counters
        if s.state == "arriving":
            s.hold(items, now)
            return True
        added = s.append(items, now)
        if not added:
            return True
        c.notifications += sum(len(x.pids) for x in added)
        gone = s.enforce(now)
        if self.store is not None:
            self.store.append(s, [x for x in added if x.last > s.lost])
            if any(gone.values()):
                self.store.trim(s)
        if s.state == "attached":
            self.flush(s)
        return True

    def flush(self, s: Session) -> None:
        """Send the connected client what it has not had, within the in-flight window."""
        if s.link not in self.host.clients or s.draining:
            return
        blocks = []
        now = self.host.clock()
        counters = self.host.counters
        for c in s.unsent(self.policy.max_inflight):
            d = encode_block(c.block.take(np.arange(len(c))) if c.block.at is not None
                             else c.block, c.counts, c.pids)
            d.pop("at", None)  # a session's order is its numbers' order
            d["ss"] = c.first
            blocks.append(d)
            s.sent = c.last
            counters.observe_latencies(now - c.block.ts, c.counts)
        if blocks:
            self.host.transport_send(s.link, Message(MsgType.NOTIFY, {"blocks": blocks}))

    def unsent(self, link: str, body: dict[str, Any]) -> bool:
        """The transport did not take a NOTIFY of a session's rows (its client reads too
        slowly: ``max_out_buffer``, or its principal is over its queue quota): they go
        again on a later flush, which the client's acknowledgement of what it has read
        (or the next row) brings. Before, the session counted them as sent; the client
        acknowledged the later rows and the dropped ones left the buffer unseen -- a
        silent loss the simulator, without transport limits, never had. ``False`` if
        ``link`` has no session here (the notifications are dropped, counted)."""
        s = self.of(link)
        if s is None:
            return False
        firsts = [d.get("ss") for d in body.get("blocks", ()) if isinstance(d, dict)]
        numbers = [f for f in firsts if type(f) is int]
        if numbers:
            s.sent = max(s.acked, min(s.sent, min(numbers) - 1))
        return True

    def ack(self, link: str, n: int, resend: bool = False) -> None:
        """The client has processed every row up to ``n`` (``resend``: it missed rows
        after ``n`` and wants them again)."""
        s = self.of(link)
        if s is None:
            raise WireError("SACK from a client without a session", field="session")
        if s.state == "arriving":
            s.acked = max(s.acked, n)
            return
        before = s.acked
        s.ack(n)
        if resend:
            s.sent = s.acked
        if s.acked > before and self.store is not None:
            self.store.trim(s)
        if s.state == "attached":
            self.flush(s)

    def resend(self, link: str) -> None:
        """Send an attached client every unacknowledged row again (its connection is
        new: what was sent on the old one, or before its ACK, is gone)."""
        s = self.of(link)
        if s is not None and s.state == "attached":
            s.sent = s.acked
            self.flush(s)

    # ---- requests during a handoff ---------------------------------------------------------------

    def defer(self, link: str, msg: Message) -> bool:
        """Hold a request of a client whose session is arriving, or whose publisher probe
        is out (replayed in order once it is here); ``False`` to handle it now."""
        s = self.of(link)
        if s is None or (s.state != "arriving" and not s.probing) \
                or msg.type is MsgType.SACK:
            return False
        q = self.deferred.setdefault(s.id, [])
        if len(q) >= self.policy.max_deferred:
            raise WireError(f"{len(q)} requests wait for session {s.id}'s handoff, the "
                            "limit (max_deferred)", field="max_deferred")
        q.append(msg)
        return True

    def replay(self, s: Session) -> None:
        for msg in self.deferred.pop(s.id, []):
            self.host.handle(s.link, msg)

    # ---- handoff --------------------------------------------------------------------------------

    def release(self, sid: str, to: str, epoch: int) -> dict[str, Any] | None:
        """Hand the state of ``sid`` over to broker ``to`` (the old broker's last step):
        returns the transfer (``Session.to_wire``) or ``None`` if nothing is held."""
        cur = self.sessions.get(sid)
        s = None
        if cur is None or cur.epoch >= epoch:  # an older requester: the older copy
            s = self.outgoing.pop(sid, None)
        if s is None:
            s = cur
            if s is None or s.epoch >= epoch:
                return None
            self.sessions.pop(sid)
            if s.link in self.host.clients:  # still connected here: taken over
                # told, not cut off: a client that moved closed this connection itself
                # and what it published last may still wait to be read here
                self.host.transport_send(s.link, Message(MsgType.ERROR, error_body(
                    SessionMoved(f"session {sid} moved to broker {to}: another process "
                                 "took it over (a session is one process at a time)",
                                 field="session"))))
        self.moved[sid] = (to, epoch, self.host.clock())
        if s.probing:  # what it published meanwhile goes out before the state leaves
            s.probing = False
            self.replay(s)
        if self.store is not None:
            self.store.delete(sid)
        self.counts["handoffs_out"] += 1
        return s.to_wire()

    def establish(self, s: Session, transfer: dict[str, Any] | None,
                  outcome: str | None = None) -> None:
        """The state of an arriving session is here (``None``: it could not be had, or
        with ``outcome="new"`` there was none): take it, number the rows held meanwhile,
        resume the client."""
        if s.state != "arriving":
            return
        failed = transfer is None and outcome != "new"
        # what the move named or the locate found (read while it is still arriving)
        known = self.mover.profiles_of(s) if self.mover is not None \
            and s.profiles is not None else None
        if transfer is None and not failed:
            s.tag = s.epoch if s.tag == 0 else s.tag
        if transfer is not None:
            acked, tag, epoch, pub = s.acked, s.tag, s.epoch, s.pub_seq
            owner = s.principal
            s.load_meta(transfer, self.host.clock())
            s.principal = owner or s.principal  # checked here; older brokers send none
            s.load_chunks([Chunk.from_wire(d, self.host.schema)
                           for d in transfer.get("chunks", [])])
            s.epoch, s.tag = epoch, tag
            s.pub_seq = max(pub, s.pub_seq)
            s.renumber_above(acked)  # a stale copy must not number below the client
            if acked > s.acked:
                s.ack(acked)
            old = Seen.from_wire(transfer.get("seen") or {}, self.host.clock())
            s.seen.merge(old, self.host.clock())  # the old broker's memory is its own
            self.counts["handoffs_in"] += 1
        else:
            old = Seen()
            self.counts["handoffs_failed"] += failed
            # no copy came: number after the client's ack, as _open does for a new one
            s.renumber_above(s.acked)  # (from 1, rows up to the ack were never sent)
        self.counts["duplicates_dropped"] += s.merge_pending(old)
        s.enforce(self.host.clock())
        s.state = "attached" if s.link in self.host.clients else "away"
        if s.state == "away":
            s.away_since = self.host.clock()
        s.sent = s.acked
        if self.store is not None:
            self.store.replace(s)
        if s.state == "attached":
            self.host.transport_send(s.link, Message(MsgType.REPLY, {
                "service": "session", "event": self._status(s, (
                    outcome or ("handoff_failed" if failed else "ready")), known)}))
        if not s.probing:
            self.replay(s)
        if s.state == "attached":
            self.flush(s)
        if self.mover is not None:
            self.mover.established(s)
            if s.state == "away":
                self.mover.on_away(s)

    def fold(self, s: Session, chunks: list[Any]) -> None:
        """Take the rows of a copy of ``s`` whose claim lost to this one
        (:meth:`Session.fold`), stored and sent like a delivery."""
        added = s.fold([Chunk.from_wire(d, self.host.schema) for d in chunks],
                       self.host.clock())
        if self.store is not None and added:
            self.store.append(s, [x for x in added if x.last > s.lost])
            self.store.trim(s)
        if s.state == "attached":
            self.flush(s)

    # ---- time ----------------------------------------------------------------------------------

    def kick(self) -> None:
        """Start the timers (a transport that can run them has just been attached)."""
        self._ticking = False
        if self.sessions or self.outgoing or self.moved:
            self._arm()

    def _arm(self) -> None:
        if not self._ticking:
            self._ticking = True
            self.host.call_later(TICK, self.tick)

    def tick(self) -> None:
        """Expire sessions away too long, drop rows too old, give up late handoffs."""
        self._ticking = False
        now = self.host.clock()
        for s in list(self.sessions.values()):
            if s.state == "away" and s.away_since is not None \
                    and now - s.away_since > s.limits.expiry:
                self.counts["expired"] += 1
                self.end(s, "expired")
                continue
            if s.state == "arriving":
                if now > s.deadline and self.mover is not None:
                    self.mover.give_up(s)
                continue
            gone = s.enforce(now)
            s.seen.prune(now, self.policy.dedupe_window)
            if any(gone.values()) and self.store is not None:
                self.store.trim(s)
        for sid, (_, _, t) in list(self.moved.items()):
            if now - t > self.policy.limits.expiry:
                del self.moved[sid]
        for sid, s in list(self.outgoing.items()):
            if s.away_since is not None and now - s.away_since > s.limits.expiry:
                del self.outgoing[sid]
        if self.sessions or self.outgoing or self.moved:
            self._arm()

    # ---- persistence and stats -------------------------------------------------------------------

    def _persist_meta(self, s: Session) -> None:
        if self.store is not None and s.state != "arriving":
            try:
                self.store.put_meta(s)
            except SiftbusError:
                log.exception("%s: session %s not stored", self.host.name, s.id)

    def stats(self) -> dict[str, Any]:
        """Sessions by state, buffered rows and bytes, overflow, handoffs."""
        by: dict[str, int] = {"attached": 0, "away": 0, "arriving": 0}
        rows = nbytes = 0
        overflow = 0
        for s in self.sessions.values():
            by[s.state] = by.get(s.state, 0) + 1
            rows += s.count + s.pending_rows
            nbytes += s.nbytes
            overflow += sum(s.overflow.values())
        return {"sessions": len(self.sessions), **by, "buffered": rows,
                "buffered_bytes": nbytes, "overflow": overflow, **self.counts}


def session_gid(sid: str, tag: int, pid: str) -> str:
    """The network-wide id of a session's profile."""
    return f"{SESSION_PREFIX}{sid}/{tag}/{pid}"


__all__ = ["CLAIM_REFUSALS", "TICK", "Mover", "SessionBusy", "SessionHost", "SessionMoved",
           "SessionRequest",
           "SessionTable", "session_gid"]
