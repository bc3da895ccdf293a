"""Whose session is it? The owner check that precedes a handoff on a secured network.

A session belongs to the principal that opened it (:attr:`Session.principal
<siftbus.broker.sessions.Session.principal>`, carried in the transfer and the store), on
every broker that holds a copy of it. Before a broker that holds no copy takes a session
over for a connecting client -- before any route moves, any profile is subscribed or the
client's HELLO is answered -- it asks the holders whether the client's principal is the
owner, with ``HANDOFF`` messages of two kinds:

* ``chk``/``cha`` (directed): the question goes to the broker the client says it came
  from (``from``), else where this broker knows the session went; the answer is ``ok``,
  ``deny``, ``unknown`` (a copy whose owner is not recorded), ``moved`` (with where to:
  the question follows, at most :data:`MAX_HOPS` times) or ``none``;
* ``cw``/``ce`` (a wave, like the locate wave of :mod:`.handoff_base`): when no broker
  is named, or the named one holds nothing and knows no newer holder, the question
  floods the tree and every broker echoes its verdict, combined on the way back
  (``deny`` over ``unknown`` over ``ok`` over ``cut`` -- a link of the tree was down --
  over ``none``).

**Finding a session for a fresh process** (:meth:`ClaimCheck.find`): a client that knows
only its session id (no epoch: a new process) at a broker that holds no copy must take
over the newest state wherever it is, and must be numbered above it *before* its HELLO is
answered (an epoch given first and corrected later let a client that moved again share
its epoch with another copy). The same wave does it, with ``"n": 1`` in ``cw``: every
broker also echoes its newest copy (``b``: ``[epoch, broker, tag, profiles, told]``, the
locate wave's candidate of :mod:`.handoff_base` and the number it tells this find) and
whether a tree link of its subtree was down (``x``); the newest copy (by epoch) wins,
and the finder is numbered one above what its holder told it. A holder tells successive
finds successive numbers (the copy's epoch, then one above the last told), so two fresh
processes whose waves both pass it are numbered apart. On an open network the owner
verdict is not asked (every copy is ``ok``).

Every copy of a session has the same owner (a copy is only made after this check
passed, or by the owner at its first broker), so any copy answers for all; ``none``
everywhere means the id is free. The claimant's broker settles: ``ok`` or ``none`` lets
the handoff begin, anything else -- and no verdict within ``claim_timeout`` (a holder
unreachable, a link down) -- refuses the client (:mod:`.session_table`). Without
security nothing is checked and nothing is sent.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from siftbus.wire.frames import get

from .session_table import SessionTable
from .sessions import SessionPolicy
from .waves import EchoWaves

log = logging.getLogger("siftbus.broker")

MAX_HOPS = 16
"""``moved`` redirects a directed check follows before it asks the whole tree."""

RANK = {"none": 0, "cut": 1, "ok": 2, "unknown": 3, "deny": 4}
"""How verdicts combine: the strongest objection wins. ``cut``: no copy was found, but
a link of the tree was down, so a holder may lie beyond it (refused: a free id is only
granted when every broker was asked; a found copy answers for all)."""

Verdict = Callable[[str], None]
Found = Callable[[str, "list[Any] | None"], None]
"""Told the verdict and the newest copy found (``None``: no copy anywhere)."""


class _Host(Protocol):
    name: str
    sessions: SessionTable

    def neighbours_up(self) -> frozenset[str]: ...

    def call_later(self, delay: float, fn: Any) -> None: ...


class _Tree(Protocol):
    def knows(self, dest: str) -> bool: ...

    def next_round(self, epoch: int) -> int: ...

    @property
    def adjacent(self) -> dict[str, list[str]]: ...


class CheckedHandoff(Protocol):
    """What the owner check needs of its handoff protocol (:class:`~siftbus.broker.
    handoff_base.HandoffBase`): its broker, tree, policy and messages."""

    @property
    def host(self) -> _Host: ...

    @property
    def overlay(self) -> _Tree: ...

    @property
    def policy(self) -> SessionPolicy: ...

    handlers: dict[str, Any]
    hop_kinds: set[str]

    def send(self, link: str, body: dict[str, Any]) -> None: ...

    def send_to(self, dest: str, body: dict[str, Any], oob: bool = False) -> None: ...

    def newest_copy(self, sid: str) -> list[Any] | None: ...


class _Claim:
    __slots__ = ("done", "find", "hops", "owner", "sid")

    def __init__(self, sid: str, owner: str, done: Found, find: bool = False) -> None:
        self.sid = sid
        self.owner = owner
        self.done = done
        self.find = find
        self.hops = 0


class _Value:
    """What a claim wave has gathered at one broker: the strongest verdict, the newest
    copy (finds only) and whether a tree link was down."""

    __slots__ = ("best", "cut", "verdict")

    def __init__(self, verdict: str, best: list[Any] | None = None, cut: bool = False
                 ) -> None:
        self.verdict = verdict
        self.best = best
        self.cut = cut


class ClaimCheck:
    """The owner check of one broker's handoff protocol (see the module docstring)."""

    def __init__(self, handoff: CheckedHandoff) -> None:
        self.handoff = handoff
        self.host = handoff.host
        self._claims: dict[str, _Claim] = {}
        self._waves = EchoWaves(handoff.send, self.host.neighbours_up, _echo_body,
                                _merge, lambda cid, w: self._ended(cid, w.value))
        self._ids = itertools.count(1)
        self._issued: dict[str, int] = {}
        """Per session held here: the highest epoch a find has been told (each find
        that passes here is numbered above the one before: two fresh processes at
        once get different epochs)."""
        handoff.handlers.update({"chk": self._on_check, "cha": self._on_answer,
                                 "cw": self._on_wave, "ce": self._on_echo})
        handoff.hop_kinds.update({"cw", "ce"})

    # ---- what this broker knows ----------------------------------------------------------------

    def verdict(self, sid: str, owner: str) -> str:
        """This broker's answer for a claim of ``sid`` by ``owner``: ``none`` when it holds
        no copy, else whether every copy it holds is ``owner``'s."""
        table = self.host.sessions
        copies = [s for s in (table.sessions.get(sid), table.outgoing.get(sid))
                  if s is not None]
        if not copies:
            return "none"
        if not owner:  # an open network: a find asks for copies, not owners
            return "ok"
        if any(s.principal and s.principal != owner for s in copies):
            return "deny"
        return "unknown" if any(not s.principal for s in copies) else "ok"

    # ---- the claimant's side ---------------------------------------------------------------------

    def check(self, sid: str, owner: str, previous: str | None, done: Verdict) -> str | None:
        """Check that ``owner`` owns ``sid`` (or that nobody does). Returns the verdict
        when this broker knows it at once; else ``None``, and ``done(verdict)`` is called
        once later (``timeout`` after ``claim_timeout`` seconds without one)."""
        here = self.verdict(sid, owner)
        if here != "none":
            return here
        overlay = self.handoff.overlay
        me = self.host.name
        moved = self.host.sessions.moved.get(sid)
        # the client's word first: a record of where the session went from here may be
        # from an earlier stay, many moves ago (a wrong start costs a wave)
        target = previous if previous is not None else moved[0] if moved else None
        if target is not None and (target == me or not overlay.knows(target)):
            target = None
        if target is None and not self.host.neighbours_up():
            return self._cut(None, "none")  # nobody to ask
        cid = self._start(_Claim(sid, owner, lambda v, _: done(v)))
        if target is not None:
            self._ask(cid, self._claims[cid], target)
        else:
            self._flood(cid, self._claims[cid])
        return None

    def find(self, sid: str, owner: str, done: Found) -> None:
        """Find the newest copy of ``sid`` anywhere in the tree, and (``owner``: not
        empty on a secured network) check that ``owner`` owns it: ``done(verdict,
        newest)`` is called once, after one wave (``cut`` if a tree link was down,
        ``timeout`` after ``claim_timeout`` seconds)."""
        cid = self._start(_Claim(sid, owner, done, find=True))
        self._flood(cid, self._claims[cid])

    def _start(self, claim: _Claim) -> str:
        cid = f"{self.host.name}:{next(self._ids)}"
        self._claims[cid] = claim
        self.host.call_later(self.handoff.policy.claim_timeout,
                             lambda: self._settle(cid, "timeout"))
        return cid

    def _ask(self, cid: str, claim: _Claim, target: str) -> None:
        self.handoff.send_to(target, {"k": "chk", "c": cid, "s": claim.sid,
                                      "p": claim.owner, "o": self.host.name})

    def _flood(self, cid: str, claim: _Claim) -> None:
        body: dict[str, Any] = {"k": "cw", "c": cid, "s": claim.sid, "p": claim.owner}
        if claim.find:
            body["n"] = 1
        self._waves.start(cid, claim.sid, self._value(None, body), body)

    def _ended(self, cid: str, value: _Value) -> None:
        claim = self._claims.get(cid)
        if claim is not None and claim.find and value.cut:
            # a newer copy may lie behind the down link: numbering above the copies
            # found could give this client the epoch of one it cannot see
            self._settle(cid, "cut")
        else:
            best = value.best  # the finder is numbered above what its holder told it
            self._settle(cid, value.verdict, None if best is None else [
                max(int(best[0]), int(best[4])), best[1], best[2], best[3]])

    def _settle(self, cid: str, verdict: str, best: list[Any] | None = None) -> None:
        claim = self._claims.pop(cid, None)
        if claim is None:
            return  # settled already (or timed out)
        self._waves.waves.pop(cid, None)
        if verdict == "timeout":
            log.warning("%s: the holders of session %s did not answer in time",
                        self.host.name, claim.sid)
        claim.done(verdict, best)

    def _on_answer(self, link: str, body: dict[str, Any]) -> None:
        cid = get(body, "c", str)
        claim = self._claims.get(cid)
        if claim is None:
            return
        v = get(body, "v", str)
        at = body.get("at")
        if v == "moved" and isinstance(at, str) and claim.hops < MAX_HOPS \
                and at != self.host.name and self.handoff.overlay.knows(at):
            claim.hops += 1
            self._ask(cid, claim, at)
        elif v in ("moved", "none"):
            self._flood(cid, claim)  # the named broker knows no holder: ask everyone
        else:
            self._settle(cid, v if v in RANK else "unknown")

    # ---- the holders' side ---------------------------------------------------------------------

    def _on_check(self, link: str, body: dict[str, Any]) -> None:
        sid = get(body, "s", str)
        v = self.verdict(sid, get(body, "p", str))
        out: dict[str, Any] = {"k": "cha", "c": get(body, "c", str), "s": sid, "v": v}
        if v == "none":
            moved = self.host.sessions.moved.get(sid)
            if moved is not None:
                out.update(v="moved", at=moved[0])
        self.handoff.send_to(get(body, "o", str), out)

    def _on_wave(self, link: str, body: dict[str, Any]) -> None:
        self._waves.visit(link, get(body, "c", str), get(body, "s", str),
                          lambda parent: self._value(parent, body), body)

    def _value(self, parent: str | None, body: dict[str, Any]) -> _Value:
        """This broker's part of a claim wave (``parent``: the link it came from)."""
        sid, owner = get(body, "s", str), get(body, "p", str)
        verdict = self.verdict(sid, owner)
        cut = self._cut(parent, "none") == "cut"
        best = self._number(sid, self.handoff.newest_copy(sid)) if body.get("n") else None
        return _Value("cut" if cut and verdict == "none" else verdict, best, cut)

    def _number(self, sid: str, best: list[Any] | None) -> list[Any] | None:
        """The newest copy held here as a find is told it, ``[epoch, broker, tag,
        profiles, told]``: ``told`` is its epoch, or one above the last one told here
        (the finder is numbered one above it); the epoch alone picks the newest copy."""
        if best is None:
            self._issued.pop(sid, None)
            return None
        told = max(int(best[0]), self._issued.get(sid, 0))
        self._issued[sid] = self.handoff.overlay.next_round(told)  # finds never rivals
        if len(self._issued) > self.handoff.policy.max_sessions:
            # bounded: forget the ids no longer held here (a copy that comes back has
            # a newer epoch, above whatever was told before)
            table = self.host.sessions
            self._issued = {k: v for k, v in self._issued.items()
                            if k in table.sessions or k in table.outgoing}
        return [*best, told]

    def _on_echo(self, link: str, body: dict[str, Any]) -> None:
        best = body.get("b")
        self._waves.answer(link, get(body, "c", str), _Value(
            _stronger("none", body.get("v")), best if isinstance(best, list) else None,
            bool(body.get("x"))))

    def _cut(self, parent: str | None, verdict: str) -> str:
        """``verdict``, or ``cut`` instead of ``none`` when a tree neighbour (other than
        ``parent``) is down: the wave cannot look behind it."""
        tree = set(self.handoff.overlay.adjacent.get(self.host.name, ()))
        if verdict == "none" and tree - set(self.host.neighbours_up()) - {parent}:
            return "cut"
        return verdict

    def link_down(self, z: str) -> None:
        """A neighbour went: waves waiting for its echo go on without it, as ``cut``."""
        self._waves.link_down(z, lambda v: _merge(v, _Value("cut", None, True)))


def _echo_body(cid: str, value: _Value | None) -> dict[str, Any]:
    """A ``ce`` message: the verdict (``v``, as brokers before finds read it), the newest
    copy (``b``) and a down link (``x``) when there are."""
    if value is None:
        return {"k": "ce", "c": cid, "v": "none"}
    body: dict[str, Any] = {"k": "ce", "c": cid, "v": value.verdict}
    if value.best is not None:
        body["b"] = value.best
    if value.cut:
        body["x"] = 1
    return body


def _merge(ours: _Value, echoed: _Value) -> _Value:
    """Our value combined with a neighbour's echo: the stronger verdict, the newer copy."""
    best = ours.best
    theirs = echoed.best
    if theirs is not None and len(theirs) == 5 and isinstance(theirs[0], int) \
            and isinstance(theirs[4], int) and (best is None or theirs[0] > best[0]):
        best = theirs
    return _Value(_stronger(ours.verdict, echoed.verdict), best, ours.cut or echoed.cut)


def _stronger(verdict: str, echoed: Any) -> str:
    """The stronger objection of two verdicts (an unknown word counts as ``unknown``)."""
    v = echoed if echoed in RANK else "unknown" if isinstance(echoed, str) else "none"
    return v if RANK[v] > RANK[verdict] else verdict


__all__ = ["MAX_HOPS", "RANK", "CheckedHandoff", "ClaimCheck", "Found", "Verdict"]
