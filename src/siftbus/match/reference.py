"""The correctness oracle: every profile against every event, literally.

It is deliberately naive: no index, no caching, no shortcut. Every faster structure in
siftbus is tested against it.
"""

from __future__ import annotations

from collections.abc import Sequence

from siftbus.match.base import ProfileRegistry
from siftbus.model import Event, Profile


class ReferenceMatcher(ProfileRegistry):
    """Brute-force matcher: ``Profile.matches`` for each registered profile."""

    def add(self, profile: Profile) -> None:
        self._register(profile)

    def remove(self, profile_id: str) -> Profile:
        return self._unregister(profile_id)

    def match(self, event: Event) -> list[str]:
        return sorted(pid for pid, p in self._profiles.items() if p.matches(event))

    def match_batch(self, events: Sequence[Event]) -> list[list[str]]:
        return [self.match(e) for e in events]
