"""What a client asks for when it connects with a session, and why it may be refused.

:class:`SessionRequest` is the checked ``session`` map of a client's HELLO
(``docs/mobility.md``); :data:`CLAIM_REFUSALS` the reasons given to a client whose claim
of a session is refused, by the verdict of :mod:`.claims`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siftbus.errors import WireError
from siftbus.model import Profile, Schema
from siftbus.wire.limits import Limits
from siftbus.wire.profiles import decode_profiles

from .sessions import SessionLimits

CLAIM_REFUSALS = {
    "deny": "the session belongs to another principal",
    "unknown": "the session's owner is not recorded where it is held (a state from an "
               "open network or an older broker): connect at the broker that holds it, "
               "or wait until it expires",
    "cut": "its holders could not all be asked (a link of the network is down); "
           "connect again later",
    "timeout": "its holders did not answer within {timeout:g} s (claim_timeout); "
               "connect again",
}
"""Why a client is refused a session, by the verdict of the owner check (:mod:`.claims`)."""


MAX_NUMBER = 2**53
"""The largest session number, epoch or tag a client may name: a session counts on from
it (rows, epochs), and every count must stay a 64-bit integer on every broker and in
every store; 2**53 also keeps it exact where a number becomes a float (JSON consumers).
No session gets near it (a million rows a second for 285 years)."""


def session_id(body: Any) -> str:
    """The session id of a HELLO's ``session`` map: a non-empty string (an empty one
    was taken for no id, and the client got a made-up name as its session)."""
    if not isinstance(body, dict):
        raise WireError("HELLO session must be a map", field="session")
    sid = body.get("id")
    if not isinstance(sid, str) or not sid:
        raise WireError("HELLO session id must be a non-empty name", field="id")
    return sid


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """The ``session`` map of a client's HELLO, checked."""

    id: str
    clean: bool = False
    """Start afresh: drop whatever this broker keeps under the id."""
    previous: str | None = None
    """The broker the client was attached to last (``from``)."""
    ack: int | None = None
    """The last number the client has processed (its own durable record)."""
    epoch: int = 0
    tag: int = 0
    limits: SessionLimits | None = None
    profiles: tuple[Profile, ...] | None = None
    """The client's profiles under its own ids (it knows them; the new broker needs
    them to take the session over), or ``None`` (the old broker is asked)."""
    adverts: tuple[Profile, ...] = ()

    @classmethod
    def parse(cls, body: Any, sid: str, schema: Schema, limits: Limits) -> SessionRequest:
        if not isinstance(body, dict):
            raise WireError("HELLO session must be a map", field="session")

        def opt_int(key: str) -> int | None:
            v = body.get(key)
            if v is None:
                return None
            if type(v) is not int or not 0 <= v <= MAX_NUMBER:
                raise WireError(f"HELLO session {key} must be a whole number from 0 to "
                                f"{MAX_NUMBER}", field=key)
            return v

        prev = body.get("from")
        if prev is not None and not isinstance(prev, str):
            raise WireError("HELLO session from must be a broker name", field="from")
        lim = body.get("limits")
        if lim is not None and not isinstance(lim, dict):
            raise WireError("HELLO session limits must be a map", field="limits")
        profiles = body.get("profiles")
        adverts = body.get("adverts") or []
        return cls(
            sid, bool(body.get("clean", False)), prev, opt_int("ack"),
            opt_int("epoch") or 0, opt_int("tag") or 0,
            SessionLimits.from_mapping(lim) if lim else None,
            None if profiles is None else tuple(decode_profiles(
                profiles, schema, limits, what="profiles")),
            tuple(decode_profiles(adverts, schema, limits, what="adverts")))

    @property
    def fresh(self) -> bool:
        """A process that knows no epoch of its session (a new one, with only the id):
        it must be numbered above every copy held anywhere (:meth:`ClaimCheck.find
        <siftbus.broker.claims.ClaimCheck.find>`)."""
        return self.epoch == 0 and not self.clean


__all__ = ["CLAIM_REFUSALS", "MAX_NUMBER", "SessionRequest", "session_id"]
