"""The composite engine: many composite profiles over one event stream.

The components of every profile sit in one primitive matcher (ids
``<composite id>/<label>``); each event is matched once, and only the automata whose
components it matched see it. Profiles that differ only in id and subscriber share one
automaton and get each match under their own id. A reorder buffer turns arrival order
into position order within the *lateness bound*: the watermark is
``W = latest time seen - lateness``, events before ``W`` are evaluated in position order,
and an event that arrives with a time before ``W`` (or before an event already evaluated)
is *late*: counted, handed to ``on_late``, not evaluated. Timers close the windows of
automata that see no more events.

A broker hands over the component ids its routing table matched (``components=``), so
the engine's own matcher is then only the id directory.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.lang.composite import CompositeProfile, format_composite
from siftbus.match.base import Matcher
from siftbus.match.composite.automaton import AutomatonStats, CompositeAutomaton
from siftbus.match.composite.base import CompositeMatch, Position, StampedEvent
from siftbus.match.composite.plan import compile_plan
from siftbus.match.engines import make_matcher
from siftbus.model import Profile

_INF = 2**63


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """Bounds on what the engine holds (docs/composite.md, "Limits")."""

    lateness: int = 0
    """How late (microseconds of event time) an event may arrive and still be evaluated."""
    state_limit: int = 10_000
    """Runs per composite profile; beyond it the oldest are shed (and counted)."""
    max_buffered: int = 100_000
    """Events waiting for the watermark; beyond it the oldest is evaluated early."""
    max_matches: int = 1_000
    """Matches of one profile that one event may complete; the rest are dropped (and
    counted): ``select each`` over components in any order completes one
    per combination of the runs held."""

    def __post_init__(self) -> None:
        for name in ("lateness", "state_limit", "max_buffered", "max_matches"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "lateness"
                                                                     else 1):
                raise ValueError(f"EngineLimits.{name} must be a "
                                 f"{'non-negative' if name == 'lateness' else 'positive'} "
                                 f"integer, got {v!r}")


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Counters of a composite engine (sums over its profiles where it says so)."""

    profiles: int
    """Composite profiles registered."""
    automata: int
    """Automata evaluating them (equal profiles of different subscribers share one)."""
    offered: int
    """Events offered."""
    evaluated: int
    """Events that matched a component and were evaluated in position order."""
    late: int
    """Events that arrived after the lateness bound: counted, not evaluated."""
    forced: int
    """Events evaluated before the watermark reached them (the buffer was full)."""
    buffered: int
    """Events waiting for the watermark now."""
    runs: int
    """Runs held now, all profiles."""
    expired: int
    killed: int
    shed: int
    """Runs shed by the state limit, all profiles."""
    matches: int
    """Matches emitted, all profiles (each subscriber's copy counted)."""
    capped: int = 0
    """Matches dropped by ``max_matches``, all profiles."""


class CompositeEngine:
    """Composite profiles evaluated together over one stream (see the module docstring)."""

    def __init__(self, *, limits: EngineLimits | None = None,
                 matcher: Matcher | str = "index",
                 on_late: Callable[[StampedEvent], object] | None = None) -> None:
        self.limits = limits or EngineLimits()
        self.matcher = make_matcher(matcher) if isinstance(matcher, str) else matcher
        self.on_late = on_late
        self._handles = itertools.count()
        self._profiles: dict[str, tuple[int, CompositeProfile]] = {}
        # signature (the line without id) -> the automaton new equal profiles may join:
        # only one that has seen no event yet, so every member sees the same stream
        self._shared: dict[str, int] = {}
        self._signatures: dict[int, str] = {}
        self._open: set[int] = set()
        self._members: dict[int, list[CompositeProfile]] = {}
        self._automata: dict[int, CompositeAutomaton] = {}
        self._components: dict[str, tuple[int, int]] = {}  # component id -> (handle, bit)
        self._buffer: list[tuple[int, object, int, StampedEvent, dict[int, int]]] = []
        self._seq = itertools.count()
        self._timers: list[tuple[int, int, int]] = []  # (deadline, seq, handle)
        self._scheduled: dict[int, int] = {}
        self._max_seen: int | None = None
        self._watermark: int | None = None
        self._last: Position | None = None
        self._closed = False
        self.offered = 0
        self.evaluated = 0
        self.late = 0
        self.forced = 0
        self.emitted = 0

    # ---- the profile set -----------------------------------------------------------
    def add(self, profile: CompositeProfile) -> None:
        """Register a composite profile.

        Profiles that differ only in id and subscriber share one automaton (a building
        has many subscribers with the same rule) as long as it has seen no event (a
        later member would otherwise get matches of events from before it came); the
        components of the first member stand in the matcher for all, and every member
        receives each match.
        """
        if profile.id in self._profiles:
            raise DuplicateProfileError(f"composite profile id {profile.id!r} is already "
                                        "registered", field=profile.id)
        signature = format_composite(profile, with_id=False)
        handle = self._shared.get(signature)
        if handle is None:
            plan = compile_plan(profile)
            handle = next(self._handles)
            self._register_components(handle, profile)
            self._shared[signature] = handle
            self._signatures[handle] = signature
            self._open.add(handle)
            self._automata[handle] = CompositeAutomaton(
                plan, state_limit=self.limits.state_limit, max_matches=self.limits.max_matches)
            self._members[handle] = []
        for i, c in enumerate(profile.components()):
            self._components[c.profile.id] = (handle, 1 << i)
        self._members[handle].append(profile)
        self._profiles[profile.id] = (handle, profile)

    def _register_components(self, handle: int, profile: CompositeProfile) -> None:
        added: list[str] = []
        try:
            for c in profile.components():
                self.matcher.add(c.profile)
                added.append(c.profile.id)
        except Exception:
            for cid in added:
                self.matcher.remove(cid)
            raise

    def remove(self, profile_id: str) -> CompositeProfile:
        """Unregister a composite profile (its automaton goes with its last member)."""
        entry = self._profiles.pop(profile_id, None)
        if entry is None:
            raise UnknownProfileError(f"no composite profile with id {profile_id!r}",
                                      field=profile_id)
        handle, profile = entry
        members = self._members[handle]
        first = members[0] is profile
        members.remove(profile)
        for c in profile.components():
            del self._components[c.profile.id]
        if first:
            for c in profile.components():
                self.matcher.remove(c.profile.id)
            if members:
                self._register_components(handle, members[0])
        if not members:
            del self._members[handle], self._automata[handle]
            self._close_sharing(handle)
            del self._signatures[handle]
            self._scheduled.pop(handle, None)
        return profile

    def get(self, profile_id: str) -> CompositeProfile:
        try:
            return self._profiles[profile_id][1]
        except KeyError:
            raise UnknownProfileError(f"no composite profile with id {profile_id!r}",
                                      field=profile_id) from None

    def profiles(self) -> Iterator[CompositeProfile]:
        return iter([p for _, p in self._profiles.values()])

    def component_profiles(self) -> Iterator[Profile]:
        """The primitive profiles of every component of every profile (what a broker
        routes: each subscriber's components under their own ids)."""
        return iter([c.profile for _, p in self._profiles.values() for c in p.components()])

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._profiles

    def profile_stats(self, profile_id: str) -> AutomatonStats:
        """The counters of the automaton that evaluates this profile (shared with the
        profiles that differ from it only in id and subscriber)."""
        try:
            return self._automata[self._profiles[profile_id][0]].stats()
        except KeyError:
            raise UnknownProfileError(f"no composite profile with id {profile_id!r}",
                                      field=profile_id) from None

    def stats(self) -> EngineStats:
        per = [a.stats() for a in self._automata.values()]
        return EngineStats(len(self._profiles), len(self._automata), self.offered,
                           self.evaluated, self.late, self.forced, len(self._buffer),
                           sum(s.runs for s in per), sum(s.expired for s in per),
                           sum(s.killed for s in per), sum(s.shed for s in per),
                           self.emitted, sum(s.capped for s in per))

    @property
    def watermark(self) -> int | None:
        """Events with a time before this are evaluated; later arrivals before it are late."""
        return self._watermark

    # ---- the stream ----------------------------------------------------------------
    def offer(self, ev: StampedEvent, components: Iterable[str] | None = None, *,
              deadline: float | None = None) -> list[CompositeMatch]:
        """Give one event; ``components`` are the component ids it matched (default: ask
        the engine's matcher). Returns the matches emitted meanwhile; with a
        ``deadline`` (``time.perf_counter()``) evaluation stops once it has passed and
        the rest waits for :meth:`release` (see :attr:`pending`)."""
        ids = self.matcher.match(ev.event) if components is None else components
        return self._offer(ev, self._masks(ids), deadline)

    def offer_batch(self, events: Sequence[StampedEvent]) -> list[CompositeMatch]:
        """Give several events (matched in one batch), in arrival order."""
        out: list[CompositeMatch] = []
        for ev, ids in zip(events, self.matcher.match_batch([e.event for e in events]),
                           strict=True):
            out.extend(self._offer(ev, self._masks(ids), None))
        return out

    def advance(self, now: int, *, deadline: float | None = None) -> list[CompositeMatch]:
        """No event older than ``now - lateness`` will come (a clock tick): evaluate what
        the watermark passed and close the windows that ended before it (up to the
        ``deadline``, as for :meth:`offer`)."""
        if self._closed:
            return []
        self._see(now)
        return self._release(deadline)

    @property
    def pending(self) -> bool:
        """Whether events the watermark passed wait for evaluation (a deadline stopped
        it): :meth:`release` goes on."""
        wm = self._watermark
        return wm is not None and bool(self._buffer) and self._buffer[0][0] < wm

    def release(self, *, deadline: float | None = None) -> list[CompositeMatch]:
        """Go on evaluating what the watermark passed (up to the ``deadline``)."""
        return self._release(deadline)

    def flush(self) -> list[CompositeMatch]:
        """The stream has ended: evaluate every buffered event and close every window.
        Later events are late."""
        self._closed = True
        self._watermark = _INF
        return self._release()

    # ---- internals -----------------------------------------------------------------
    def _masks(self, ids: Iterable[str]) -> dict[int, int]:
        masks: dict[int, int] = {}
        comps = self._components
        for cid in ids:
            hit = comps.get(cid)
            if hit is not None:
                masks[hit[0]] = masks.get(hit[0], 0) | hit[1]
        return masks

    def _see(self, t: int) -> None:
        if self._max_seen is None or t > self._max_seen:
            self._max_seen = t
            self._watermark = t - self.limits.lateness

    def _offer(self, ev: StampedEvent, masks: dict[int, int], deadline: float | None
               ) -> list[CompositeMatch]:
        self.offered += 1
        wm = self._watermark
        if (wm is not None and ev.time < wm) or (self._last is not None
                                                 and ev.position < self._last):
            self.late += 1
            if self.on_late is not None:
                self.on_late(ev)
            return []
        if masks:
            for handle in masks:
                if handle in self._open:  # its first event: no member may join now
                    self._close_sharing(handle)
            heapq.heappush(self._buffer, (ev.time, ev.order, next(self._seq), ev, masks))
        self._see(ev.time)
        out = self._release(deadline)
        while len(self._buffer) > self.limits.max_buffered:
            self.forced += 1
            out.extend(self._evaluate(heapq.heappop(self._buffer)))
        return out

    def _release(self, deadline: float | None = None) -> list[CompositeMatch]:
        out: list[CompositeMatch] = []
        wm = self._watermark
        if wm is None:
            return out
        buf = self._buffer
        while buf and buf[0][0] < wm:
            out.extend(self._evaluate(heapq.heappop(buf)))
            if deadline is not None and buf and time.perf_counter() >= deadline:
                return out  # the rest (and the timers after it) on the next call
        out.extend(self._due(wm))
        return out

    def _evaluate(self, item: tuple[int, object, int, StampedEvent, dict[int, int]]
                  ) -> list[CompositeMatch]:
        t, _, _, ev, masks = item
        self._last = ev.position
        self.evaluated += 1
        out = self._due(t)
        for handle, mask in masks.items():
            a = self._automata.get(handle)
            if a is not None:
                found = a.on_event(ev, mask)
                if found:
                    out.extend(self._fan_out(handle, found))
                self._schedule(handle, a)
        return out

    def _close_sharing(self, handle: int) -> None:
        """No new member may join this automaton any more."""
        self._open.discard(handle)
        sig = self._signatures[handle]
        if self._shared.get(sig) == handle:
            del self._shared[sig]

    def _fan_out(self, handle: int, found: list[CompositeMatch]) -> list[CompositeMatch]:
        """One copy of each match per member of the automaton, under its id."""
        members = self._members[handle]
        out = [CompositeMatch(p.id, p.owner, m.bindings, m.completed)
               for m in found for p in members]
        self.emitted += len(out)
        return out

    def _schedule(self, handle: int, a: CompositeAutomaton) -> None:
        d = a.next_deadline()
        if d is None:
            return
        current = self._scheduled.get(handle)
        if current is None or d < current:
            self._scheduled[handle] = d
            heapq.heappush(self._timers, (d, next(self._seq), handle))

    def _due(self, now: int) -> list[CompositeMatch]:
        """Run the timers of the automata whose deadline lies before ``now``."""
        out: list[CompositeMatch] = []
        timers = self._timers
        while timers and timers[0][0] < now:
            d, _, handle = heapq.heappop(timers)
            if self._scheduled.get(handle) != d:
                continue  # superseded by an earlier deadline, or the profile is gone
            del self._scheduled[handle]
            a = self._automata[handle]
            found = a.on_time(now)
            if found:
                out.extend(self._fan_out(handle, found))
            self._schedule(handle, a)
        return out


__all__ = ["CompositeEngine", "EngineLimits", "EngineStats"]
