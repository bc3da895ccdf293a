"""The interface every matcher implements, and the conformance helpers they share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.model import Event, Profile


@runtime_checkable
class Matcher(Protocol):
    """A dynamic set of profiles that answers "which profiles does this event satisfy?".

    Ids are unique within a matcher. ``match`` returns ids sorted as plain strings (by
    code point), exactly what ``siftbus.match.reference`` returns for the same profiles.
    """

    def add(self, profile: Profile) -> None:
        """Register a profile.

        Raises :class:`~siftbus.errors.DuplicateProfileError` if its id is taken.
        """

    def remove(self, profile_id: str) -> Profile:
        """Unregister and return a profile.

        Raises :class:`~siftbus.errors.UnknownProfileError` if absent.
        """

    def match(self, event: Event) -> list[str]:
        """Ids of the profiles the event satisfies, sorted."""

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        """``[match(e) for e in events]``, possibly faster."""

    def get(self, profile_id: str) -> Profile:
        """The registered profile with this id."""

    def profiles(self) -> Iterator[Profile]:
        """Every registered profile."""

    def __len__(self) -> int: ...

    def __contains__(self, profile_id: object) -> bool: ...


def add_all(matcher: Matcher, profiles: Iterable[Profile]) -> Matcher:
    """Add every profile; returns the matcher for chaining."""
    for p in profiles:
        matcher.add(p)
    return matcher


def positions_by_type(events: Sequence[Event]) -> dict[str, list[int]]:
    """Positions of ``events`` grouped by event type, in order: batch matchers run one
    kernel call per type and scatter the rows back to these positions."""
    groups: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        groups.setdefault(e.type_name, []).append(i)
    return groups


class ProfileRegistry:
    """The id-to-profile bookkeeping every matcher shares, with the protocol's errors."""

    def __init__(self) -> None:
        self._profiles: dict[str, Profile] = {}

    def _register(self, profile: Profile) -> None:
        if profile.id in self._profiles:
            raise DuplicateProfileError(f"profile id {profile.id!r} is already registered",
                                        field=profile.id)
        self._profiles[profile.id] = profile

    def _unregister(self, profile_id: str) -> Profile:
        try:
            return self._profiles.pop(profile_id)
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=profile_id) from None

    def get(self, profile_id: str) -> Profile:
        try:
            return self._profiles[profile_id]
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=profile_id) from None

    def profiles(self) -> Iterator[Profile]:
        return iter(list(self._profiles.values()))

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._profiles
