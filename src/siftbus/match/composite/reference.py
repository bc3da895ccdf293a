"""The reference evaluator of composite profiles: docs/composite.md, literally.

It is deliberately naive: it tries every assignment of the stream's events to the
positive components (every subset of events, in every role), keeps the bindings that
satisfy the pattern as the semantics section defines it (recursively over the pattern,
scanning the whole stream for each negation), orders them by completion and walks the
selection and consumption policies over that order. No automaton, no index, no
incremental state: the automaton is tested against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from siftbus.lang.composite import (
    Component,
    CompositeProfile,
    Conjunction,
    Consumption,
    Disjunction,
    FollowedBy,
    Negation,
    Node,
    Select,
    Windowed,
    labels_of,
)
from siftbus.match.composite.base import CompositeMatch, StampedEvent
from siftbus.model import Key

Binding = dict[str, StampedEvent]
# A completion or event key: (time, 0, order) for an event, (time, 1) for "after every
# event of that time" (the end of a trailing negation's window).
SortKey = tuple[object, ...]


def reference_matches(profile: CompositeProfile, stream: Iterable[StampedEvent]
                      ) -> list[CompositeMatch]:
    """The emitted matches of ``profile`` over ``stream``, in emission order."""
    events = sorted(stream, key=lambda e: e.position)
    found: list[tuple[SortKey, SortKey, CompositeMatch]] = []
    for binding in _assignments(profile, events):
        ends: list[int] = []
        if not _correlated(profile, binding.values()):
            continue
        times = [e.time for e in binding.values()]
        start = min(times)
        if max(times) - start > profile.window:
            continue
        if not _satisfies(profile.pattern, binding, events, profile, (start, profile.window),
                          ends):
            continue
        last = max(binding.values(), key=lambda e: e.position)
        completion: SortKey = (last.time, 0, last.order)
        for end in ends:
            completion = max(completion, (end, 1))
        ordered = sorted(binding.items(), key=lambda kv: kv[1].position)
        tiebreak = (tuple(e.position for _, e in ordered), tuple(lab for lab, _ in ordered))
        completed = completion[0]
        assert isinstance(completed, int)
        found.append((completion, tiebreak, CompositeMatch(
            profile.id, profile.owner, tuple(ordered), completed)))
    found.sort(key=lambda t: (t[0], t[1]))
    return _apply_policies(profile, [m for _, _, m in found])


def _apply_policies(profile: CompositeProfile, ordered: list[CompositeMatch]
                    ) -> list[CompositeMatch]:
    out: list[CompositeMatch] = []
    started: set[object] = set()
    used: set[object] = set()
    for m in ordered:
        positions = [ev.position for _, ev in m.bindings]
        if profile.select is Select.FIRST and m.start.position in started:
            continue
        if profile.consumption is Consumption.CONSUME and any(p in used for p in positions):
            continue
        out.append(m)
        started.add(m.start.position)
        used.update(positions)
    return out


def _assignments(profile: CompositeProfile, events: list[StampedEvent]
                 ) -> Iterator[Binding]:
    """Every non-empty assignment of distinct events to positive components whose events
    each match their component (bindings spanning more than the window are cut early:
    adding events never shrinks a span)."""
    comps = profile.positive()
    candidates = [[e for e in events if c.profile.matches(e.event)] for c in comps]

    def rec(i: int, binding: Binding, lo: int | None, hi: int | None) -> Iterator[Binding]:
        if i == len(comps):
            if binding:
                yield dict(binding)
            return
        yield from rec(i + 1, binding, lo, hi)
        taken = {id(e) for e in binding.values()}
        for e in candidates[i]:
            if id(e) in taken:
                continue
            nlo = e.time if lo is None else min(lo, e.time)
            nhi = e.time if hi is None else max(hi, e.time)
            if nhi - nlo > profile.window:
                continue
            binding[comps[i].label] = e
            yield from rec(i + 1, binding, nlo, nhi)
            del binding[comps[i].label]

    yield from rec(0, {}, None, None)


def _same_keys(profile: CompositeProfile, e: StampedEvent) -> tuple[Key, ...]:
    return tuple(e.event.key(a) for a in profile.same)


def _correlated(profile: CompositeProfile, events: Iterable[StampedEvent]) -> bool:
    keys = {_same_keys(profile, e) for e in events}
    return len(keys) <= 1


def _bound(node: Node, binding: Binding) -> list[StampedEvent]:
    return [binding[lab] for lab in labels_of(node) if lab in binding]


def _satisfies(node: Node, binding: Binding, stream: list[StampedEvent],
               profile: CompositeProfile, window: tuple[int, int], ends: list[int]) -> bool:
    """Whether ``binding`` satisfies ``node``; ``window`` is (start, length) of the
    innermost group around it; trailing negations append the end of their window."""
    if isinstance(node, Component):
        return node.label in binding and node.profile.matches(binding[node.label].event)
    if isinstance(node, Windowed):
        evs = _bound(node, binding)
        if not evs:
            return False
        times = [e.time for e in evs]
        if max(times) - min(times) > node.window:
            return False
        return _satisfies(node.pattern, binding, stream, profile, (min(times), node.window),
                          ends)
    if isinstance(node, Conjunction):
        return all(_satisfies(o, binding, stream, profile, window, ends)
                   for o in node.operands)
    if isinstance(node, Disjunction):
        chosen = [o for o in node.operands if _bound(o, binding)]
        return len(chosen) == 1 and _satisfies(chosen[0], binding, stream, profile, window,
                                               ends)
    assert isinstance(node, FollowedBy)
    return _followed_by(node, binding, stream, profile, window, ends)


def _followed_by(node: FollowedBy, binding: Binding, stream: list[StampedEvent],
                 profile: CompositeProfile, window: tuple[int, int], ends: list[int]) -> bool:
    steps = node.steps
    positive = [i for i, s in enumerate(steps) if not isinstance(s, Negation)]
    for i in positive:
        step = steps[i]
        assert not isinstance(step, Negation)
        if not _satisfies(step, binding, stream, profile, window, ends):
            return False
    for a, i in enumerate(positive):
        for j in positive[a + 1:]:
            if (max(e.position for e in _bound(steps[i], binding))
                    >= min(e.position for e in _bound(steps[j], binding))):
                return False
    anchor = next(iter(binding.values()))
    for k, step in enumerate(steps):
        if not isinstance(step, Negation):
            continue
        before = max(i for i in positive if i < k)
        after = [i for i in positive if i > k]
        lo = max(e.position for e in _bound(steps[before], binding))
        for e in stream:
            if not step.component.profile.matches(e.event):
                continue
            if _same_keys(profile, e) != _same_keys(profile, anchor):
                continue
            if after:
                hi = min(x.position for x in _bound(steps[after[0]], binding))
                if lo < e.position < hi:
                    return False
            elif e.position > lo and e.time <= window[0] + window[1]:
                return False
        if not after:
            ends.append(window[0] + window[1])
    return True


__all__ = ["reference_matches"]
