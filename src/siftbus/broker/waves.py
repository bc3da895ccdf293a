"""Echo waves over the broker tree: ask every broker, combine the answers on the way back.

A wave floods from its initiator over the neighbour links that are up; a broker that
receives it records the link it came from (its parent), passes it on to its other
neighbours and, once each of them has echoed (a broker reached twice echoes the empty
value at once), echoes its own value combined with theirs to its parent. The initiator
ends with the combination over every broker reached: ``2`` messages per link. Used to
locate a session (:mod:`.handoff_base`, ``loc``/``echo``) and to check its owner
(:mod:`.claims`, ``cw``/``ce``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Wave:
    """One wave at one broker: what it is about, where it came from, who has not
    echoed yet, and the value so far."""

    __slots__ = ("key", "parent", "value", "waiting")

    def __init__(self, key: str, parent: str | None, waiting: set[str], value: Any) -> None:
        self.key = key
        self.parent = parent
        self.waiting = waiting
        self.value = value


class EchoWaves:
    """The waves one broker takes part in, of one kind.

    ``send(link, body)`` sends a message; ``echo(wid, value)`` is the body of an echo;
    ``merge(value, echoed)`` combines a neighbour's echoed value into ours; ``ended(wid,
    wave)`` is told at the initiator when every broker reached has echoed."""

    def __init__(self, send: Callable[[str, dict[str, Any]], None],
                 neighbours_up: Callable[[], frozenset[str]],
                 echo: Callable[[str, Any], dict[str, Any]],
                 merge: Callable[[Any, Any], Any],
                 ended: Callable[[str, Wave], None]) -> None:
        self._send = send
        self._up = neighbours_up
        self._echo_body = echo
        self._merge = merge
        self._ended = ended
        self.waves: dict[str, Wave] = {}

    def start(self, wid: str, key: str, value: Any, body: dict[str, Any]) -> None:
        """Start wave ``wid`` here (``value``: this broker's own answer)."""
        nbrs = set(self._up())
        self.waves[wid] = Wave(key, None, nbrs, value)
        for z in sorted(nbrs):
            self._send(z, {**body})
        if not nbrs:
            self._echo(wid)

    def visit(self, link: str, wid: str, key: str, value: Callable[[str | None], Any],
              body: dict[str, Any]) -> None:
        """Wave ``wid`` arrived from ``link``; ``value(parent)`` is this broker's answer."""
        if wid in self.waves:  # a tree has no second way here; answer and stop
            self._send(link, self._echo_body(wid, None))
            return
        kids = set(self._up()) - {link}
        self.waves[wid] = Wave(key, link, kids, value(link))
        for z in sorted(kids):
            self._send(z, {**body})
        if not kids:
            self._echo(wid)

    def answer(self, link: str, wid: str, echoed: Any) -> None:
        """``link`` echoed ``echoed`` for wave ``wid``."""
        w = self.waves.get(wid)
        if w is None:
            return
        w.value = self._merge(w.value, echoed)
        w.waiting.discard(link)
        if not w.waiting:
            self._echo(wid)

    def link_down(self, z: str, mark: Callable[[Any], Any]) -> None:
        """Neighbour ``z`` went: waves waiting for it go on without it, their value
        changed by ``mark``."""
        for wid, w in list(self.waves.items()):
            if z in w.waiting:
                w.waiting.discard(z)
                w.value = mark(w.value)
                if not w.waiting:
                    self._echo(wid)

    def _echo(self, wid: str) -> None:
        w = self.waves.pop(wid)
        if w.parent is not None:
            self._send(w.parent, self._echo_body(wid, w.value))
        else:
            self._ended(wid, w)


__all__ = ["EchoWaves", "Wave"]
