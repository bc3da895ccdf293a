"""What a locating claim sees and to which copy it defers: claims in a total order.

A claim that must locate its session (its client named no previous broker, or no
profiles) floods a locate wave (:meth:`HandoffBase.locate
<siftbus.broker.handoff_base.HandoffBase.locate>`); each broker echoes the newest copy
*older* than the claim, the one to take over (``best``), and the newest copy *newer* than
it (``newer``). Before, a newer copy was invisible: a claim whose rival (same round, a
higher rank) or successor had already taken the state found nothing older, started an
empty session beside it, and two copies of one session lived on, both processes
connected and neither told (issue 30 item 2, ``bench/session_races.py --revive``).

Epochs are unique per (round, broker) (:mod:`.overlay`), so claims are totally ordered
and the older of two defers to the newer deterministically (:func:`deferral`): it
*yields* -- the rows it held go to the newer copy (``fold``) and its client, if still
connected, is told ``SessionMoved`` -- unless the newer copy is settled with no client
connected while its own client is: then the live process keeps the session, and the
claim takes that copy over in the round after it (as a rival claim does whose holder
has no client). Two claims locating at once never wait for each other: a claim asks
again only while the newest *older* copy is itself locating, and that older claim
yields to it as soon as its own wave ends.

A ``newer`` entry is ``[epoch, broker, tag, profiles, live, arriving]``: ``profiles`` as
:meth:`HandoffBase.profiles_of <siftbus.broker.handoff_base.HandoffBase.profiles_of>`
gives them (``None`` for a copy still locating), ``live`` 1 when its client is
connected, ``arriving`` 1 while its handoff is under way. Brokers that echo no
``newer`` are read as knowing none (older brokers).
"""

from __future__ import annotations

from typing import Any, Protocol

from .session_table import SessionTable
from .sessions import Session


class LocateHost(Protocol):
    name: str
    clients: set[str]
    sessions: SessionTable


class Locating(Protocol):
    """What the order needs from a handoff protocol."""

    @property
    def host(self) -> LocateHost: ...

    def profiles_of(self, s: Session) -> list[Any]: ...


def older_copy(h: Locating, sid: str, before: int) -> list[Any] | None:
    """``[epoch, broker, tag, profiles]`` if this broker holds a copy of ``sid`` older
    than epoch ``before`` (the newest such: ``best``)."""
    table = h.host.sessions
    s = table.sessions.get(sid)
    if s is None or s.epoch >= before:
        s = table.outgoing.get(sid)
    if s is None or s.epoch >= before:
        return None
    if s.state == "arriving" and s.profiles is None:
        # itself still locating, without its profiles: the locator must not take
        # "none" for an answer (seed 298 of the rendezvous handoff lost them)
        return [s.epoch, h.host.name, s.tag, None]
    return [s.epoch, h.host.name, s.tag, h.profiles_of(s)]


def newer_copy(h: Locating, sid: str, before: int) -> list[Any] | None:
    """This broker's copy of ``sid`` if its epoch is above ``before`` (a ``newer``
    entry, see the module docstring)."""
    host = h.host
    s = host.sessions.sessions.get(sid)
    if s is None or s.epoch <= before:
        return None
    arriving = s.state == "arriving"
    profiles = None if arriving and s.profiles is None else h.profiles_of(s)
    return [s.epoch, host.name, s.tag, profiles, int(s.link in host.clients),
            int(arriving)]


def merge(value: tuple[Any, Any], echoed: Any) -> tuple[Any, Any]:
    """A locate wave's value ``(best, newer)`` combined with a neighbour's echo: the
    newest older copy, and the newest newer one."""
    best, newer = value
    e_best, e_newer = echoed if isinstance(echoed, tuple) else (echoed, None)
    if _entry(e_best, 4) and (best is None or e_best[0] > best[0]):
        best = e_best
    if _entry(e_newer, 6) and (newer is None or e_newer[0] > newer[0]):
        newer = e_newer
    return best, newer


def deferral(s: Session, best: list[Any] | None, newer: list[Any] | None,
             clients: set[str]) -> str | None:
    """What the locating claim ``s`` does about the ``newer`` copy its wave met:
    ``"take"`` it over (its own client is connected, the copy is settled and its
    client is not), ``"yield"`` to it, or ``None``: go on with ``best``, the newest
    older copy, as before. That is the case while the newer claim is itself arriving
    and an older copy exists: it may be fetching the state from this claim (its
    client moved on from here, a ``move`` naming this broker, which waits until this
    claim has the state), and yielding would leave that state where it is."""
    if newer is None or newer[0] <= s.epoch or (newer[5] and best is not None):
        return None
    if s.link in clients and not newer[4] and not newer[5] and newer[3] is not None:
        return "take"
    return "yield"


def _entry(x: Any, n: int) -> bool:
    return isinstance(x, list) and len(x) == n and type(x[0]) is int \
        and isinstance(x[1], str)


__all__ = ["Locating", "deferral", "merge", "newer_copy", "older_copy"]
