"""The two parties a :class:`~siftbus.broker.session_table.SessionTable` works with, as
protocols: its broker node (:class:`SessionHost`) and the handoff protocol that moves
sessions between brokers (:class:`Mover`).

Separate from :mod:`.session_table` so that what the table may ask of each side reads in
one place, and so that the node and :mod:`.handoff` can be checked against it without
reading the table's bookkeeping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from siftbus.errors import SiftbusError
from siftbus.model import Schema
from siftbus.wire.frames import Message
from siftbus.wire.limits import Limits

from .session_request import SessionRequest
from .sessions import Session
from .stats import Counters


class SessionHost(Protocol):
    """What the session table needs from its broker node."""

    name: str
    schema: Schema
    counters: Counters
    limits: Limits
    clients: set[str]

    def clock(self) -> float: ...

    def transport_send(self, link: str, msg: Message) -> None: ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> None: ...

    def handle(self, link: str, msg: Message) -> None: ...

    def forget_client(self, link: str) -> None:
        """Remove a client's profiles and advertisements (its session ended)."""

    def session_settled(self, link: str, result: dict[str, Any] | SiftbusError) -> None:
        """A claim left pending by :meth:`SessionTable.hello` is settled: the status for
        the client's ACK, or the error that refuses it."""


class Mover(Protocol):
    """What the session table asks of the handoff protocol (:mod:`.handoff`)."""

    def move_in(self, s: Session, req: SessionRequest) -> None:
        """A client arrived with a session held elsewhere: fetch it."""

    def on_away(self, s: Session) -> None:
        """A session's client left (it may come back here or elsewhere)."""

    def on_back(self, s: Session) -> None:
        """A session's client came back to this broker (or opened it here)."""

    def next_epoch(self, after: int) -> int:
        """The epoch this broker claims for an attachment numbered from ``after``."""

    def give_up(self, s: Session) -> None:
        """An arriving session waited too long for its state."""

    def established(self, s: Session) -> None:
        """An arriving session's state is here (requests for it may now be answered)."""

    def profiles_of(self, s: Session) -> list[Any]:
        """The profiles of a session held here under its client's ids (wire form)."""

    def check(self, sid: str, owner: str, previous: str | None,
              done: Callable[[str], None]) -> str | None:
        """Whether ``owner`` owns ``sid`` (a verdict of :mod:`.claims`), now or later."""

    def find(self, sid: str, owner: str, done: Callable[[str, Any], None]) -> None:
        """The newest copy of ``sid`` anywhere (and, with ``owner``, whether it is
        ``owner``'s): ``done(verdict, [epoch, broker, tag, profiles] or None)`` later."""


__all__ = ["Mover", "SessionHost"]
