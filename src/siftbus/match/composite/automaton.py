"""The matching automaton of one composite profile, with bounded state.

It consumes the events that matched the profile's components, in position order (the
engine's reorder buffer guarantees that), and keeps *runs*: partial bindings that can
still become matches, partitioned by the values of the ``same`` attributes. For an event:

1. every run of its partition is extended by the event in every role the branch tables
   allow (order: ``precede``; windows: the groups), and the event starts new runs;
2. every run (old and new) whose negated gap the event falls into loses that branch;
3. runs now complete for their branch are emitted in tie-break order through the
   policies, or, with a trailing negation, wait until its window has closed
   (:meth:`on_time`).

Runs expire when the line's window has passed their start; ``state_limit`` caps the runs
of the profile, shedding those with the oldest start first (counted in ``shed``);
``max_matches`` caps the matches one event completes, in tie-break order (the rest are
dropped and counted in ``capped``): under ``select each`` a pattern of four components in
any order completes a match per combination of the runs held. The
policies prune at once: after an emitted match under ``select first`` no run with the
same start can be emitted, under ``consume`` no run holding one of its events.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from siftbus.lang.composite import Consumption, Select
from siftbus.match.composite.base import CompositeMatch, StampedEvent
from siftbus.match.composite.plan import Branch, Plan
from siftbus.model import Key

Evs = tuple[tuple[int, StampedEvent], ...]


class _Run:
    """A partial binding: bound components, surviving branches, events in order."""

    __slots__ = ("alive", "bound", "end", "evs")

    def __init__(self, bound: int, alive: int, evs: Evs, end: int | None = None) -> None:
        self.bound = bound
        self.alive = alive
        self.evs = evs
        self.end = end  # set while complete and waiting for trailing windows to close


_EMPTY = _Run(0, 0, ())


class _Ended:
    """What the matches emitted in one event or clock step end (by ``id`` of the event,
    as runs share the event objects)."""

    __slots__ = ("starts", "used")

    def __init__(self) -> None:
        self.starts: set[int] = set()
        self.used: set[int] = set()


@dataclass(frozen=True, slots=True)
class AutomatonStats:
    """Counters of one composite profile's automaton."""

    runs: int
    """Runs held now (partial bindings and completed ones waiting for a window)."""
    partitions: int
    """Distinct values of the ``same`` attributes with runs."""
    created: int
    """Runs created so far."""
    expired: int
    """Runs dropped because their window passed."""
    killed: int
    """Runs that lost every branch to a negated event."""
    shed: int
    """Runs dropped because the profile held more than ``state_limit`` runs."""
    matches: int
    """Matches emitted."""
    capped: int = 0
    """Matches dropped because one event completed more than ``max_matches``."""


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _first_time(evs: Evs, members: int) -> int:
    """Time of the earliest bound event among ``members`` (events are in order)."""
    for label, ev in evs:
        if members >> label & 1:
            return ev.time
    raise AssertionError("no member bound")


class CompositeAutomaton:
    """Evaluates one composite profile over events given in position order."""

    def __init__(self, plan: Plan, *, state_limit: int = 10_000,
                 max_matches: int = 1_000) -> None:
        if state_limit < 1:
            raise ValueError("state_limit must be at least 1")
        if max_matches < 1:
            raise ValueError("max_matches must be at least 1")
        self.max_matches = max_matches
        self.plan = plan
        self.profile = plan.profile
        self.window = plan.profile.window
        self.state_limit = state_limit
        self._branches: tuple[Branch, ...] = plan.branches
        self._all = (1 << len(plan.branches)) - 1
        self._labels = tuple(c.label for c in plan.components)
        self._first = plan.profile.select is Select.FIRST
        self._consume = plan.profile.consumption is Consumption.CONSUME
        self._parts: dict[tuple[Key, ...], list[_Run]] = {}
        self._starts: list[tuple[int, object, tuple[Key, ...]]] = []  # heap: oldest start
        self._pending: list[tuple[int, object, int, _Run, tuple[Key, ...]]] = []  # heap
        self._seq = itertools.count()
        self.n_runs = 0
        self.created = 0
        self.expired = 0
        self.killed = 0
        self.shed = 0
        self.matches = 0
        self.capped = 0

    # ---- public --------------------------------------------------------------------
    def stats(self) -> AutomatonStats:
        return AutomatonStats(self.n_runs, len(self._parts), self.created, self.expired,
                              self.killed, self.shed, self.matches, self.capped)

    def next_deadline(self) -> int | None:
        """The time after which :meth:`on_time` has work: a window to close or expire."""
        out: int | None = None
        if self._pending:
            out = self._pending[0][0]
        if self._starts:
            d = self._starts[0][0] + self.window
            out = d if out is None else min(out, d)
        return out

    def on_event(self, ev: StampedEvent, labels: int) -> list[CompositeMatch]:
        """Evaluate ``ev``, which matched the components in mask ``labels``; returns the
        matches emitted (first those whose windows closed before ``ev.time``)."""
        t = ev.time
        window = self.window
        pending, starts = self._pending, self._starts
        if (pending and pending[0][0] < t) or (starts and starts[0][0] + window < t):
            out = self.on_time(t)
        else:
            out = []
        plan = self.plan
        same = plan.same[ev.event.etype.name]
        key = tuple(map(ev.event.keys.__getitem__, same)) if same else ()
        old = self._parts.get(key, [])
        positive = _bits(labels & ~plan.negated)
        negated = labels & plan.negated
        kept: list[_Run] = []
        new: list[_Run] = []
        for r in old:
            if not r.alive:
                continue
            if r.end is None and t - r.evs[0][1].time > window:
                self.expired += 1
                continue
            kept.append(r)
            if positive and r.end is None:
                for y in positive:
                    r2 = self._extend(r, y, ev)
                    if r2 is not None:
                        new.append(r2)
        fresh = False
        for y in positive:
            r2 = self._extend(_EMPTY, y, ev, self._all)
            if r2 is not None:
                new.append(r2)
                fresh = True
        if negated:
            for r in itertools.chain(kept, new):
                self._kill(r, negated, ev)
        now: list[_Run] = []
        for r in new:
            if not r.alive:
                continue
            self.created += 1
            branch = self._complete(r)
            if branch is None:
                kept.append(r)
                continue
            if branch.trailing:
                end = max(_first_time(r.evs, branch.groups[s.group].members)
                          + branch.groups[s.group].window for s in branch.trailing)
                if end >= ev.time:
                    r.end = end
                    kept.append(r)
                    heapq.heappush(self._pending, (end, self._tiebreak(r), next(self._seq),
                                                   r, key))
                    continue
            now.append(r)
        if fresh:
            heapq.heappush(self._starts, (ev.time, ev.order, key))
        kept = [r for r in kept if r.alive]
        self._store(key, old, kept)
        if now:
            now.sort(key=self._tiebreak)
            budget = self.max_matches - len(out)
            ended = _Ended()
            for r in now:
                if not r.alive or self._ends(r, ended):
                    continue
                if budget <= 0:
                    self.capped += 1
                    r.alive = 0
                    continue
                out.append(self._emit(r, key, ev.time, ended))
                budget -= 1
            self._prune(key, ended)
        if self.n_runs > self.state_limit:
            self._shed()
        return out

    def on_time(self, now: int) -> list[CompositeMatch]:
        """Every event before ``now`` has been given: emit the waiting matches whose
        windows closed before ``now`` and expire the runs whose window passed."""
        out: list[CompositeMatch] = []
        pending = self._pending
        touched: dict[tuple[Key, ...], _Ended] = {}
        while pending and pending[0][0] < now:
            end, _, _, r, key = heapq.heappop(pending)
            ended = touched.setdefault(key, _Ended())
            if r.alive and not self._ends(r, ended):
                # not capped: each waited for its own window (no product of one event)
                out.append(self._emit(r, key, end, ended))
        for key, ended in touched.items():
            self._prune(key, ended)
        starts = self._starts
        window = self.window
        while starts and starts[0][0] + window < now:
            _, _, key = heapq.heappop(starts)
            runs = self._parts.get(key)
            if runs is None:
                continue
            keep = []
            for r in runs:
                if r.alive and r.end is None and r.evs[0][1].time + window < now:
                    self.expired += 1
                elif r.alive:
                    keep.append(r)
            self._store(key, runs, keep)
        return out

    # ---- internals -----------------------------------------------------------------
    def _store(self, key: tuple[Key, ...], old: list[_Run], runs: list[_Run]) -> None:
        self.n_runs += len(runs) - len(old)
        if runs:
            self._parts[key] = runs
        else:
            self._parts.pop(key, None)

    def _ends(self, r: _Run, ended: _Ended) -> bool:
        """Whether a policy ended ``r`` by a match emitted before it (then it dies)."""
        if ((self._first and id(r.evs[0][1]) in ended.starts)
                or (self._consume and any(id(ev) in ended.used for _, ev in r.evs))):
            r.alive = 0
            return True
        return False

    def _prune(self, key: tuple[Key, ...], ended: _Ended) -> None:
        """Apply the policies to a partition and drop the runs that ended: once per event
        (or clock step), not once per match (a partition may hold ``state_limit`` runs)."""
        runs = self._parts.get(key)
        if runs is None:
            return
        if ended.starts or ended.used:
            for r in runs:
                if r.alive:
                    self._ends(r, ended)
        self._store(key, runs, [x for x in runs if x.alive])

    def _tiebreak(self, r: _Run) -> tuple[tuple[object, ...], tuple[str, ...]]:
        return (tuple(ev.position for _, ev in r.evs), tuple(self._labels[y] for y, _ in r.evs))

    def _extend(self, r: _Run, y: int, ev: StampedEvent, alive: int | None = None
                ) -> _Run | None:
        """``r`` with ``ev`` bound to component ``y``, if some branch allows it."""
        bit = 1 << y
        bound = r.bound
        if bound & bit:
            return None
        survivors = 0
        for b in _bits(r.alive if alive is None else alive):
            br = self._branches[b]
            if not br.atoms & bit or br.precede[y] & ~bound:
                continue
            ok = True
            for g in br.groups_of[y]:
                grp = br.groups[g]
                if grp.members & bound and ev.time - _first_time(r.evs, grp.members) > grp.window:
                    ok = False
                    break
            if ok:
                survivors |= 1 << b
        if not survivors:
            return None
        return _Run(bound | bit, survivors, (*r.evs, (y, ev)))

    def _kill(self, r: _Run, negated: int, ev: StampedEvent) -> None:
        """Drop the branches of ``r`` whose open negated gap ``ev`` falls into."""
        if not r.alive:
            return
        pos = ev.position
        for b in _bits(r.alive):
            br = self._branches[b]
            for y in _bits(negated):
                for s in br.negs_of[y]:
                    if s.before & ~r.bound or s.after & r.bound:
                        continue  # the gap has not begun, or is closed
                    last = max(e.position for lab, e in r.evs if s.before >> lab & 1)
                    if not last < pos:
                        continue
                    if not s.after:
                        grp = br.groups[s.group]
                        if ev.time > _first_time(r.evs, grp.members) + grp.window:
                            continue
                    r.alive &= ~(1 << b)
                    break
                else:
                    continue
                break
        if not r.alive:
            self.killed += 1

    def _complete(self, r: _Run) -> Branch | None:
        for b in _bits(r.alive):
            br = self._branches[b]
            if br.atoms == r.bound:
                return br
        return None

    def _emit(self, r: _Run, key: tuple[Key, ...], completed: int, ended: _Ended
              ) -> CompositeMatch:
        """Emit ``r`` and note what the policies end with it: under ``select first`` every
        run with its start, under ``consume`` every run holding one of its events (checked
        before each later emission and applied by :meth:`_prune`)."""
        self.matches += 1
        r.alive = 0
        if self._first:
            ended.starts.add(id(r.evs[0][1]))
        if self._consume:
            ended.used.update(id(ev) for _, ev in r.evs)
        return CompositeMatch(self.profile.id, self.profile.owner,
                              tuple((self._labels[y], ev) for y, ev in r.evs), completed)

    def _shed(self) -> None:
        """Drop the runs with the oldest starts until the limit holds."""
        while self.n_runs > self.state_limit and self._starts:
            t, order, key = heapq.heappop(self._starts)
            runs = self._parts.get(key, [])
            keep = []
            for r in runs:
                st = r.evs[0][1]
                if r.alive and st.time == t and st.order == order:
                    self.shed += 1
                    r.alive = 0
                elif r.alive:
                    keep.append(r)
            self._store(key, runs, keep)
        while self.n_runs > self.state_limit and self._pending:
            _, _, _, r, key = heapq.heappop(self._pending)
            if r.alive:
                self.shed += 1
                r.alive = 0
                runs = self._parts.get(key, [])
                self._store(key, runs, [x for x in runs if x.alive])


__all__ = ["AutomatonStats", "CompositeAutomaton"]
