"""Persistent notifications and collection changes on the wire (codec only, no I/O).

Message bodies of the retained (temporal) messages, see ``docs/temporal.md``:

* a notification between brokers: ``[id, publisher, version, start, end, subspace]``
  with ``start``/``end`` floats or ``None`` (unbounded) and ``subspace`` a wire profile
  (:mod:`siftbus.wire.profiles`);
* a notification from a publishing client: ``[id, start, end, ttl, subspace]`` (the
  broker names the publisher, sets the version and fills in ``start`` = now);
* a change to a subscribing client: ``[kind, filter id, notification, reason]``, where a
  removal carries the notification id only;
* a filter from a client: ``[subspace profile, semantics]``.

Every decoder returns a value or raises :class:`~siftbus.errors.WireError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from siftbus.errors import InputError, SiftbusError, WireError
from siftbus.model import Profile, Schema
from siftbus.temporal.notification import (
    Change,
    ChangeKind,
    PersistentNotification,
    Reason,
    Semantics,
    TemporalFilter,
    Validity,
)

from .limits import DEFAULT_LIMITS, Limits
from .profiles import decode_profile, encode_profile

_ID = re.compile(r"[A-Za-z0-9_.\-/]{1,200}")


def check_id(text: Any, what: str) -> str:
    """A notification or filter id: 1-200 letters, digits, ``_ . - /``."""
    if not isinstance(text, str) or not _ID.fullmatch(text):
        raise WireError(f"{what} id {str(text)[:100]!r} must be 1-200 letters, digits, "
                        "'_', '.', '-', '/'", field="id")
    return text


def _time(v: Any, what: str, unbounded: float) -> float:
    if v is None:
        return unbounded
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise WireError(f"{what} must be a finite number of seconds or nil", field=what)
    return float(v)


def _bound(v: float) -> float | None:
    return None if math.isinf(v) else v


def encode_note(n: PersistentNotification) -> list[Any]:
    v = n.validity
    return [n.id, n.publisher, n.version, _bound(v.start), _bound(v.end),
            encode_profile(n.subspace)]


def decode_note(data: Any, schema: Schema,
                limits: Limits | None = DEFAULT_LIMITS) -> PersistentNotification:
    """A notification as brokers send it to each other."""
    if not isinstance(data, list) or len(data) != 6:
        raise WireError("a notification must be [id, publisher, version, start, end, "
                        "subspace]")
    nid, publisher, version, start, end, subspace = data
    if not isinstance(nid, str) or not isinstance(publisher, str):
        raise WireError("notification id and publisher must be strings")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise WireError("notification version must be a non-negative integer",
                        field="version")
    try:
        validity = Validity(_time(start, "start", -math.inf), _time(end, "end", math.inf))
    except InputError as exc:
        raise WireError(f"notification {nid[:100]!r}: {exc.message}", field=exc.field) from None
    box = decode_profile(subspace, schema, limits)
    return PersistentNotification(nid, box, publisher, validity, version)


def encode_publication(local_id: str, subspace: Profile, *, start: float | None = None,
                       end: float | None = None, ttl: float | None = None) -> list[Any]:
    """What a publishing client sends for one notification."""
    return [local_id, start, end, ttl, encode_profile(subspace.with_id(local_id))]


def decode_publication(data: Any, schema: Schema, limits: Limits, now: float
                       ) -> tuple[str, Profile, Validity]:
    """A client's notification: its local id, subspace and validity (``start`` defaults
    to ``now``; ``end`` or ``ttl``, or neither: valid until withdrawn)."""
    if not isinstance(data, list) or len(data) != 5:
        raise WireError("a published notification must be [id, start, end, ttl, subspace]")
    lid, start, end, ttl, subspace = data
    check_id(lid, "notification")
    s = None if start is None else _time(start, "start", 0.0)
    e = None if end is None else _time(end, "end", 0.0)
    t = None if ttl is None else _time(ttl, "ttl", 0.0)
    try:
        validity = Validity.of(now, start=s, end=e, ttl=t)
    except InputError as exc:
        raise WireError(f"notification {lid!r}: {exc.message}", field=exc.field) from None
    box = decode_profile(subspace, schema, limits)
    return lid, box.with_id(lid, ""), validity


def encode_filter(f: TemporalFilter) -> list[Any]:
    return [encode_profile(f.profile), f.semantics.value]


def decode_filter(data: Any, schema: Schema, limits: Limits) -> TemporalFilter:
    if not isinstance(data, list) or len(data) != 2 or not isinstance(data[1], str):
        raise WireError("a filter must be [profile, semantics]")
    p = decode_profile(data[0], schema, limits)
    check_id(p.id, "filter")
    try:
        semantics = Semantics.parse(data[1])
    except SiftbusError as exc:
        raise WireError(exc.message, field="semantics") from None
    return TemporalFilter(p, semantics)


def encode_change(ch: Change, filter_id: str) -> list[Any]:
    """A change as a client receives it (``filter_id``: the id the client knows)."""
    body: Any = ch.notification.id if ch.kind is ChangeKind.REMOVE else \
        encode_note(ch.notification)
    return [ch.kind.value, filter_id, body, ch.reason.value]


def decode_change(data: Any, schema: Schema,
                  held: Callable[[str, str], PersistentNotification | None]) -> Change:
    """A change a client received. A removal names its notification by id only:
    ``held(filter_id, notification_id)`` gives the version the client's collection holds
    (``None``: it holds none, and the change is refused)."""
    if not isinstance(data, list) or len(data) != 4:
        raise WireError("a change must be [kind, filter, notification, reason]")
    kind, fid, body, reason = data
    try:
        k, r = ChangeKind(kind), Reason(reason)
    except ValueError:
        raise WireError(f"unknown change {str(kind)[:50]!r} or reason "
                        f"{str(reason)[:50]!r}") from None
    if not isinstance(fid, str):
        raise WireError("a change's filter id must be a string")
    if k is ChangeKind.REMOVE:
        if not isinstance(body, str):
            raise WireError("a removal names its notification by id")
        n = held(fid, body)
        if n is None:
            raise WireError(f"removal of {body[:100]!r} from {fid[:100]!r}, which does not "
                            "hold it", field=fid)
        return Change(k, fid, n, r)
    return Change(k, fid, decode_note(body, schema, None), r)


__all__ = ["check_id", "decode_change", "decode_filter", "decode_note",
           "decode_publication", "encode_change", "encode_filter", "encode_note",
           "encode_publication"]
