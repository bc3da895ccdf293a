"""The correctness oracle: every profile against every event, literally.

It is deliberately naive: no index, no caching, no shortcut. Every faster structure in
siftbus is tested against it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.model import Event, Profile


class ReferenceMatcher:
    """Brute-force matcher: ``Profile.matches`` for each registered profile."""

    def __init__(self) -> None:
        self._profiles: dict[str, Profile] = {}

    def add(self, profile: Profile) -> None:
        if profile.id in self._profiles:
            raise DuplicateProfileError(f"profile id {profile.id!r} is already registered",
                                        field=profile.id)
        self._profiles[profile.id] = profile

    def remove(self, profile_id: str) -> Profile:
        try:
            return self._profiles.pop(profile_id)
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=profile_id) from None

    def match(self, event: Event) -> list[str]:
        return sorted(pid for pid, p in self._profiles.items() if p.matches(event))

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        return [self.match(e) for e in events]

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
