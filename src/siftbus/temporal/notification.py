"""Persistent subspace notifications, their validity, and the three query semantics.

Tarkoma (2006, ch. 6) generalises an event in two ways: a notification may be a
*subspace* of the content space (intervals or sets per attribute, not one point), and it
*persists* for a period instead of being matched once when it is published. Here:

* a :class:`PersistentNotification` is a profile-shaped value -- a
  :class:`~siftbus.model.Profile` of one event type, one normalised constraint per
  attribute (an attribute it leaves free is the whole domain) -- with an id, a publisher,
  a :class:`Validity` ``[start, end)`` and a version that counts its updates;
* a :class:`TemporalFilter` is a profile with one of three :class:`Semantics`, chosen per
  subscription: ``overlaps`` (some common point), ``covered-by`` (the notification lies
  inside the filter) and ``covers`` (the notification contains the filter);
* a :class:`Change` is what a subscriber's collection must do after an operation: add,
  update or remove one notification, and why.

All values are immutable. Times are floats (seconds on whatever clock the caller uses;
the broker uses its own). A notification is *active* at ``t`` when ``start <= t < end``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from siftbus.covering.relations import covers, overlaps
from siftbus.errors import InputError, ProfileError
from siftbus.model import EventType, Profile

FOREVER = math.inf
"""The end of a validity that never expires."""


@dataclass(frozen=True, slots=True)
class Validity:
    """The half-open period ``[start, end)`` in which a notification is valid."""

    start: float = -math.inf
    end: float = FOREVER

    def __post_init__(self) -> None:
        if math.isnan(self.start) or math.isnan(self.end):
            raise InputError("a validity bound is not a number", field="validity")
        if self.start == math.inf:
            raise InputError("a validity cannot start at infinity", field="start")
        if not self.start < self.end:
            raise InputError(f"a validity must end after it starts "
                             f"(start {self.start}, end {self.end})", field="end")

    @classmethod
    def of(cls, now: float, *, start: float | None = None, end: float | None = None,
           ttl: float | None = None) -> Validity:
        """A validity from what a publisher says: ``start`` (default ``now``), and
        ``end`` or ``ttl`` (seconds after ``start``) or neither (valid until withdrawn)."""
        if end is not None and ttl is not None:
            raise InputError("give an end or a ttl, not both", field="ttl")
        begin = now if start is None else float(start)
        if ttl is not None:
            if not ttl > 0 or math.isinf(ttl):
                raise InputError(f"ttl must be a positive number of seconds, got {ttl}",
                                 field="ttl")
            return cls(begin, begin + float(ttl))
        return cls(begin, FOREVER if end is None else float(end))

    def active(self, t: float) -> bool:
        """Whether the period contains ``t``."""
        return self.start <= t < self.end

    def pending(self, t: float) -> bool:
        """Whether the period starts after ``t``."""
        return t < self.start

    def expired(self, t: float) -> bool:
        """Whether the period ended at or before ``t``."""
        return self.end <= t


ALWAYS = Validity()
"""Valid at every time (until withdrawn)."""


class Semantics(enum.StrEnum):
    """How a filter selects notifications (Tarkoma's operators on subspaces)."""

    OVERLAPS = "overlaps"
    """The notification and the filter share some point."""
    COVERED_BY = "covered-by"
    """The notification lies inside the filter (the filter covers it)."""
    COVERS = "covers"
    """The notification contains the filter (it covers the filter)."""

    def selects(self, filter: Profile, subspace: Profile) -> bool:
        """Whether a filter with these semantics selects ``subspace``."""
        if self is Semantics.OVERLAPS:
            return overlaps(filter, subspace)
        if self is Semantics.COVERED_BY:
            return covers(filter, subspace)
        return covers(subspace, filter)

    @classmethod
    def parse(cls, text: str) -> Semantics:
        """A semantics by name (``overlaps``, ``covered-by``, ``covers``)."""
        try:
            return cls(text)
        except ValueError:
            raise InputError(f"unknown semantics {text!r}: use "
                             f"{', '.join(s.value for s in cls)}", field="semantics") from None


@dataclass(frozen=True, slots=True)
class PersistentNotification:
    """A subspace of one event type's content space, valid for a period.

    ``subspace`` carries the notification's id (it is normalised to ``id``);
    ``publisher`` names who published it (a broker uses ``broker/client``); ``version``
    counts updates (0 when first published).
    """

    id: str
    subspace: Profile
    publisher: str = ""
    validity: Validity = ALWAYS
    version: int = 0

    def __post_init__(self) -> None:
        _plain(self.subspace, f"notification {self.id!r}")
        if self.subspace.id != self.id or self.subspace.subscriber:
            object.__setattr__(self, "subspace", self.subspace.with_id(self.id, ""))
        if self.version < 0:
            raise InputError(f"notification {self.id!r}: negative version", field="version")

    @property
    def etype(self) -> EventType:
        return self.subspace.etype

    @property
    def type_name(self) -> str:
        return self.subspace.etype.name

    def active(self, t: float) -> bool:
        return self.validity.active(t)

    def replace(self, *, subspace: Profile | None = None, validity: Validity | None = None,
                version: int | None = None, publisher: str | None = None,
                id: str | None = None) -> PersistentNotification:
        """The same notification with some fields changed."""
        return PersistentNotification(
            self.id if id is None else id,
            self.subspace if subspace is None else subspace,
            self.publisher if publisher is None else publisher,
            self.validity if validity is None else validity,
            self.version if version is None else version)

    def same_content(self, other: PersistentNotification) -> bool:
        """Equal subspace, validity and publisher (the version aside)."""
        return (self.subspace.filter_key == other.subspace.filter_key
                and self.subspace.etype == other.subspace.etype
                and self.validity == other.validity and self.publisher == other.publisher)


@dataclass(frozen=True, slots=True)
class TemporalFilter:
    """A subscription to persistent notifications: a profile and its semantics."""

    profile: Profile
    semantics: Semantics = Semantics.OVERLAPS

    def __post_init__(self) -> None:
        _plain(self.profile, f"temporal filter {self.profile.id!r}")

    @property
    def id(self) -> str:
        return self.profile.id

    @property
    def subscriber(self) -> str:
        return self.profile.subscriber

    def selects(self, n: PersistentNotification) -> bool:
        """Whether this filter selects ``n``'s subspace (validity aside)."""
        return self.semantics.selects(self.profile, n.subspace)


def _plain(p: Profile, what: str) -> None:
    """Subspaces are boxes. A box may constrain any attribute that holds one value:
    finite and open kinds, dotted paths, and optional attributes (absence is one more
    point of such an attribute, outside every constraint and inside "free", so the box
    relations stay exact). Refused, because a box cannot say them and the relations
    would only be conservative (issue 31): ``or``, string tests, ``not exists``, and
    conditions on array attributes."""
    attrs = p.etype.attributes
    if p.extra is not None or any(attrs[c.position].array for c in p.conditions):
        raise ProfileError(f"{what}: temporal subspaces take conjunctions of =, <, ranges, "
                           "sets, prefix and exists; not 'or', string tests (suffix, "
                           "contains, like, matches, ignorecase), not exists, or "
                           "conditions on array attributes")


class ChangeKind(enum.StrEnum):
    """What a collection does with one notification."""

    ADD = "add"
    UPDATE = "update"
    REMOVE = "remove"


class Reason(enum.StrEnum):
    """Why a change happened."""

    SUBSCRIBED = "subscribed"
    """The filter is new: the notification was valid and selected already."""
    PUBLISHED = "published"
    ACTIVATED = "activated"
    """Its validity started."""
    UPDATED = "updated"
    """Its publisher changed it (an update may also add or remove it)."""
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"
    """Its validity ended."""
    UNREACHABLE = "unreachable"
    """The broker that held it cannot be reached any more (a network link went down)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One change of the collection of filter ``filter``: add, update or remove
    ``notification`` (for a removal, the last version the collection held)."""

    kind: ChangeKind
    filter: str
    notification: PersistentNotification
    reason: Reason


__all__ = [
    "ALWAYS",
    "FOREVER",
    "Change",
    "ChangeKind",
    "PersistentNotification",
    "Reason",
    "Semantics",
    "TemporalFilter",
    "Validity",
]
