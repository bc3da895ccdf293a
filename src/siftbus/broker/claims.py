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


class _Host(Protocol):
    name: str
    sessions: SessionTable

    def neighbours_up(self) -> frozenset[str]: ...

    def call_later(self, delay: float, fn: Any) -> None: ...


class _Tree(Protocol):
    def knows(self, dest: str) -> bool: ...

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


class _Claim:
    __slots__ = ("done", "hops", "owner", "sid")

    def __init__(self, sid: str, owner: str, done: Verdict) -> None:
        self.sid = sid
        self.owner = owner
        self.done = done
        self.hops = 0


class ClaimCheck:
    """The owner check of one broker's handoff protocol (see the module docstring)."""

    def __init__(self, handoff: CheckedHandoff) -> None:
        self.handoff = handoff
        self.host = handoff.host
        self._claims: dict[str, _Claim] = {}
        self._waves = EchoWaves(handoff.send, self.host.neighbours_up,
                                lambda cid, v: {"k": "ce", "c": cid, "v": v or "none"},
                                _stronger, lambda cid, w: self._settle(cid, w.value))
        self._ids = itertools.count(1)
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
        cid = f"{me}:{next(self._ids)}"
        claim = self._claims[cid] = _Claim(sid, owner, done)
        self.host.call_later(self.handoff.policy.claim_timeout,
                             lambda: self._settle(cid, "timeout"))
        if target is not None:
            self._ask(cid, claim, target)
        else:
            self._flood(cid, claim)
        return None

    def _ask(self, cid: str, claim: _Claim, target: str) -> None:
        self.handoff.send_to(target, {"k": "chk", "c": cid, "s": claim.sid,
                                      "p": claim.owner, "o": self.host.name})

    def _flood(self, cid: str, claim: _Claim) -> None:
        self._waves.start(cid, claim.sid, self._cut(None, "none"),
                          {"k": "cw", "c": cid, "s": claim.sid, "p": claim.owner})

    def _settle(self, cid: str, verdict: str) -> None:
        claim = self._claims.pop(cid, None)
        if claim is None:
            return  # settled already (or timed out)
        self._waves.waves.pop(cid, None)
        if verdict == "timeout":
            log.warning("%s: the owner of session %s was not confirmed in time",
                        self.host.name, claim.sid)
        claim.done(verdict)

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
        sid, owner = get(body, "s", str), get(body, "p", str)
        self._waves.visit(link, get(body, "c", str), sid,
                          lambda parent: self._cut(parent, self.verdict(sid, owner)), body)

    def _on_echo(self, link: str, body: dict[str, Any]) -> None:
        self._waves.answer(link, get(body, "c", str), body.get("v"))

    def _cut(self, parent: str | None, verdict: str) -> str:
        """``verdict``, or ``cut`` instead of ``none`` when a tree neighbour (other than
        ``parent``) is down: the wave cannot look behind it."""
        tree = set(self.handoff.overlay.adjacent.get(self.host.name, ()))
        if verdict == "none" and tree - set(self.host.neighbours_up()) - {parent}:
            return "cut"
        return verdict

    def link_down(self, z: str) -> None:
        """A neighbour went: waves waiting for its echo go on without it, as ``cut``."""
        self._waves.link_down(z, lambda v: _stronger(v, "cut"))


def _stronger(verdict: str, echoed: Any) -> str:
    """The stronger objection of two verdicts (an unknown word counts as ``unknown``)."""
    v = echoed if echoed in RANK else "unknown" if isinstance(echoed, str) else "none"
    return v if RANK[v] > RANK[verdict] else verdict


__all__ = ["MAX_HOPS", "RANK", "CheckedHandoff", "ClaimCheck", "Verdict"]
