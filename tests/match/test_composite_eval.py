"""The composite automaton against the reference evaluator, for every policy.

The reference (``match.composite.reference``) tries every assignment of events to
components and applies docs/composite.md literally; the engine runs the compiled
automaton behind the reorder buffer. They must emit the same matches in the same order:
on streams in position order, on streams shuffled within the lateness bound, with late
events (counted, not evaluated), and with many profiles in one engine.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composite_strategies import (
    BUILDING,
    POLICIES,
    SCHEMA,
    S,
    composites,
    shuffle_within,
    streams,
)
from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.lang.composite import CompositeProfile, format_composite, parse_composite
from siftbus.match.composite import (
    CompositeEngine,
    CompositeMatch,
    EngineLimits,
    StampedEvent,
    reference_matches,
)
from siftbus.model import Event

SLOW = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def keys(ms: list[CompositeMatch]) -> list[object]:
    return [m.key() for m in ms]


def run_engine(profile: CompositeProfile, arrivals: list[StampedEvent], lateness: int = 0,
               **kw: object) -> tuple[list[CompositeMatch], CompositeEngine]:
    engine = CompositeEngine(limits=EngineLimits(lateness=lateness, **kw),  # type: ignore[arg-type]
                             matcher="reference")
    engine.add(profile)
    out: list[CompositeMatch] = []
    for e in arrivals:
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    return out, engine


@SLOW
@given(composites(), streams())
def test_automaton_equals_reference_in_order(profile: CompositeProfile,
                                             stream: list[StampedEvent]) -> None:
    for select, consumption in POLICIES:
        p = dataclasses.replace(profile, select=select, consumption=consumption)
        expected = reference_matches(p, stream)
        got, engine = run_engine(p, stream)
        assert keys(got) == keys(expected), format_composite(p)
        assert engine.stats().late == 0


@SLOW
@given(composites(), streams(), st.integers(0, 6), st.integers(0, 2**32))
def test_automaton_equals_reference_shuffled_within_lateness(
        profile: CompositeProfile, stream: list[StampedEvent], lateness_s: int,
        seed: int) -> None:
    lateness = lateness_s * S
    arrivals = shuffle_within(stream, lateness, seed)
    for select, consumption in POLICIES:
        p = dataclasses.replace(profile, select=select, consumption=consumption)
        got, engine = run_engine(p, arrivals, lateness)
        assert keys(got) == keys(reference_matches(p, stream)), format_composite(p)
        assert engine.stats().late == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composites(), streams(max_events=8), st.integers(0, 3), st.data())
def test_late_events_are_counted_not_evaluated(profile: CompositeProfile,
                                               stream: list[StampedEvent], lateness_s: int,
                                               data: st.DataObject) -> None:
    lateness = lateness_s * S
    if not stream:
        return
    # Late events: copies of stream events re-sent with a fresh order far in the past,
    # after the stream's newest event has moved the watermark past them.
    newest = stream[-1].time
    late = []
    for i in range(data.draw(st.integers(1, 3))):
        src = data.draw(st.sampled_from(stream))
        t = newest - lateness - S * data.draw(st.integers(1, 3))
        late.append(StampedEvent(src.event, t, (-1 - i,)))
    seen: list[StampedEvent] = []
    engine = CompositeEngine(limits=EngineLimits(lateness=lateness), matcher="reference",
                             on_late=seen.append)
    engine.add(profile)
    out: list[CompositeMatch] = []
    for e in stream:
        out.extend(engine.offer(e))
    for e in late:
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    assert seen == late
    assert engine.stats().late == len(late)
    assert keys(out) == keys(reference_matches(profile, stream))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(composites(), min_size=1, max_size=4), streams(), st.integers(0, 4),
       st.integers(0, 2**32))
def test_many_profiles_in_one_engine(profiles: list[CompositeProfile],
                                     stream: list[StampedEvent], lateness_s: int,
                                     seed: int) -> None:
    profiles = [dataclasses.replace(p, id=f"x{i}", select=POLICIES[i % 4][0],
                                    consumption=POLICIES[i % 4][1])
                for i, p in enumerate(profiles)]
    # Re-parse under the new id so that component ids follow it.
    profiles = [parse_composite(format_composite(p), SCHEMA) for p in profiles]
    engine = CompositeEngine(limits=EngineLimits(lateness=lateness_s * S), matcher="reference")
    for p in profiles:
        engine.add(p)
    out: list[CompositeMatch] = []
    for e in shuffle_within(stream, lateness_s * S, seed):
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    for p in profiles:
        assert keys([m for m in out if m.profile == p.id]) == keys(reference_matches(p, stream))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(composites(), min_size=1, max_size=3), streams(), st.data())
def test_equal_profiles_share_an_automaton_and_survive_removals(
        profiles: list[CompositeProfile], stream: list[StampedEvent], data: st.DataObject
        ) -> None:
    """Subscribers with the same rule share one automaton; each gets every match under
    its own id; removing members mid-stream (the first one too) leaves the others exact,
    and removing everything leaves nothing behind."""
    copies = []
    for i, p in enumerate(profiles):
        for j in range(data.draw(st.integers(1, 3))):
            line = format_composite(p, with_id=False)
            copies.append(parse_composite(f"x{i}-{j}@sub{j}: {line}", SCHEMA))
    engine = CompositeEngine(matcher="reference")
    for c in copies:
        engine.add(c)
    assert engine.stats().automata == len({format_composite(c, with_id=False)
                                           for c in copies})
    cut = data.draw(st.integers(0, len(stream)))
    leaving = data.draw(st.lists(st.sampled_from(copies), unique_by=lambda c: c.id))
    out: list[CompositeMatch] = []
    for e in stream[:cut]:
        out.extend(engine.offer(e))
    for c in leaving:
        assert engine.remove(c.id) == c
    for e in stream[cut:]:
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    for c in copies:
        if c in leaving:
            continue
        mine = [m for m in out if m.profile == c.id]
        assert keys(mine) == [dataclasses.replace(m, profile=c.id, subscriber=c.owner).key()
                              for m in reference_matches(c, stream)]
        assert {m.subscriber for m in mine} <= {c.owner}
    for c in copies:
        if c not in leaving:
            engine.remove(c.id)
    assert len(engine) == 0 and len(engine.matcher) == 0
    assert engine.stats().automata == 0 and list(engine.component_profiles()) == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composites(), streams(), st.data())
def test_a_profile_added_mid_stream_sees_only_later_events(
        profile: CompositeProfile, stream: list[StampedEvent], data: st.DataObject) -> None:
    """An equal profile added after events were evaluated gets an automaton of its own:
    it must not receive matches of events from before it came."""
    first = parse_composite(f"early@a: {format_composite(profile, with_id=False)}", SCHEMA)
    late = parse_composite(f"late@b: {format_composite(profile, with_id=False)}", SCHEMA)
    cut = data.draw(st.integers(0, len(stream)))
    engine = CompositeEngine(matcher="reference")
    engine.add(first)
    out: list[CompositeMatch] = []
    for e in stream[:cut]:
        out.extend(engine.offer(e))
    engine.add(late)
    for e in stream[cut:]:
        out.extend(engine.offer(e))
    out.extend(engine.flush())
    assert keys([m for m in out if m.profile == "early"]) == keys(reference_matches(first,
                                                                                    stream))
    assert keys([m for m in out if m.profile == "late"]) == keys(
        reference_matches(late, stream[cut:]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composites(), streams())
def test_component_ids_from_outside_give_the_same_result(profile: CompositeProfile,
                                                         stream: list[StampedEvent]) -> None:
    """A broker hands over the component ids its table matched instead of the engine's
    own matcher; foreign ids are ignored."""
    engine = CompositeEngine(matcher="reference")
    engine.add(profile)
    comps = list(engine.component_profiles())
    out: list[CompositeMatch] = []
    for e in stream:
        ids = [c.id for c in comps if c.matches(e.event)] + ["other/profile"]
        out.extend(engine.offer(e, ids))
    out.extend(engine.flush())
    assert keys(out) == keys(reference_matches(profile, stream))


# ---- worked examples (docs/composite.md) ------------------------------------------



def ev(t: float, i: int, tname: str, **values: object) -> StampedEvent:
    return StampedEvent(Event.of(BUILDING[tname], values), round(t * S), (i,))


def labels(ms: list[CompositeMatch]) -> list[tuple[str, ...]]:
    return [tuple(f"{lab}{e.order[0]}" for lab, e in m.bindings) for m in ms]


@pytest.mark.parametrize(("policy", "expected"), [
    ("select each reuse", [("g0", "m2"), ("g1", "m2"), ("g0", "m3"), ("g1", "m3")]),
    ("select first reuse", [("g0", "m2"), ("g1", "m2")]),
    ("select each consume", [("g0", "m2"), ("g1", "m3")]),
    ("select first consume", [("g0", "m2"), ("g1", "m3")]),
])
def test_the_documented_policy_table(policy: str, expected: list[tuple[str, ...]]) -> None:
    p = parse_composite(f"a@security: g=GlassBreak(level > 5) -> m=Motion(present = 1) "
                        f"within 60 s same room {policy}", BUILDING)
    stream = [ev(0, 0, "GlassBreak", room=1, level=7), ev(5, 1, "GlassBreak", room=1, level=9),
              ev(20, 2, "Motion", room=1, present=1), ev(30, 3, "Motion", room=1, present=1)]
    assert labels(reference_matches(p, stream)) == expected
    got, _ = run_engine(p, stream)
    assert labels(got) == expected
    assert {m.subscriber for m in got} == {"security"}


def test_the_alarm_needs_the_same_room_and_the_window() -> None:
    p = parse_composite("alarm@security: glass=GlassBreak(level > 5) -> "
                        "motion=Motion(present = 1) within 60 s same room", BUILDING)
    stream = [ev(0, 0, "GlassBreak", room=1, level=7),
              ev(10, 1, "Motion", room=2, present=1),    # another room
              ev(61, 2, "Motion", room=1, present=1),    # too late
              ev(100, 3, "GlassBreak", room=5, level=3),  # not broken enough
              ev(101, 4, "Motion", room=5, present=1),
              ev(200, 5, "GlassBreak", room=9, level=10),
              ev(260, 6, "Motion", room=9, present=1)]   # exactly 60 s: within
    got, _ = run_engine(p, stream)
    assert labels(got) == [("glass5", "motion6")]
    assert got[0].event("motion").event["room"] == 9
    assert got[0].completed == 260 * S


def test_heating_fault_completes_when_its_window_closes() -> None:
    p = parse_composite("fault@facility: heat=Heater(on = 1) -> not Temperature(value > 19.0) "
                        "within 10 min same room", BUILDING)
    stream = [ev(0, 0, "Heater", room=1, on=1),
              ev(0, 1, "Heater", room=2, on=1),
              ev(300, 2, "Temperature", room=2, value=19.5),  # room 2 warms up: no fault
              ev(590, 3, "Temperature", room=1, value=18.0),  # room 1 stays cold
              ev(700, 4, "Heater", room=3, on=1)]
    engine = CompositeEngine(matcher="reference")
    engine.add(p)
    out: list[CompositeMatch] = []
    for e in stream[:4]:
        out.extend(engine.offer(e))
    assert out == []  # the window of room 1 is still open
    out.extend(engine.offer(stream[4]))  # time 700 > 600: room 1's window has closed
    assert labels(out) == [("heat0",)]
    assert out[0].completed == 600 * S
    assert labels(engine.flush()) == [("heat4",)]


def test_advance_closes_windows_without_events() -> None:
    p = parse_composite("f: Heater(on = 1) -> not Temperature(value > 19.0) within 10 s",
                        BUILDING)
    engine = CompositeEngine(matcher="reference", limits=EngineLimits(lateness=2 * S))
    engine.add(p)
    assert engine.offer(ev(0, 0, "Heater", room=1, on=1)) == []
    assert engine.advance(11 * S) == []  # watermark 9 s: the event is evaluated
    assert engine.advance(12 * S) == []  # watermark 10 s: the window ends at 10 s inclusive
    assert labels(engine.advance(13 * S)) == [("Heater0",)]


def test_state_limit_sheds_the_oldest_runs_and_counts_them() -> None:
    p = parse_composite("s: GlassBreak() -> Motion() within 1 h select each", BUILDING)
    stream = [ev(i, i, "GlassBreak", room=1, level=1) for i in range(10)]
    stream.append(ev(20, 10, "Motion", room=1, present=1))
    got, engine = run_engine(p, stream, state_limit=4)
    st_ = engine.profile_stats("s")
    assert st_.shed == 6
    assert labels(got) == [(f"GlassBreak{i}", "Motion10") for i in range(6, 10)]
    full, _ = run_engine(p, stream)
    assert len(full) == 10 == len(reference_matches(p, stream))


def test_matches_per_event_are_capped_in_tie_break_order_and_counted() -> None:
    p = parse_composite("s: GlassBreak() and Motion() within 1 h select each", BUILDING)
    stream = [ev(i, i, "GlassBreak", room=1, level=1) for i in range(10)]
    stream += [ev(20, 10, "Motion", room=1, present=1), ev(21, 11, "Motion", room=1, present=1)]
    got, engine = run_engine(p, stream, max_matches=4)
    assert labels(got) == [(f"GlassBreak{i}", f"Motion{m}") for m in (10, 11)
                           for i in range(4)]
    assert engine.stats().capped == 12 == engine.profile_stats("s").capped
    full, _ = run_engine(p, stream)
    assert len(full) == 20 == len(reference_matches(p, stream))


def test_a_deadline_stops_evaluation_and_release_goes_on() -> None:
    p = parse_composite("s: GlassBreak() -> Motion() within 1 h select each", BUILDING)
    stream = [ev(i, i, "GlassBreak", room=1, level=1) for i in range(5)]
    stream.append(ev(9, 9, "Motion", room=1, present=1))
    engine = CompositeEngine(matcher="reference", limits=EngineLimits(lateness=100 * S))
    engine.add(p)
    out: list[CompositeMatch] = []
    for e in stream:
        out.extend(engine.offer(e, deadline=0.0))
    out.extend(engine.advance(1000 * S, deadline=0.0))  # long passed: one event per call
    calls = 1
    while engine.pending:
        out.extend(engine.release(deadline=0.0))
        calls += 1
    assert calls == len(stream)
    out.extend(engine.flush())
    assert labels(out) == labels(run_engine(p, stream)[0])


def test_windows_expire_runs() -> None:
    p = parse_composite("s: GlassBreak() -> Motion() within 10 s same room", BUILDING)
    engine = CompositeEngine(matcher="reference")
    engine.add(p)
    for i in range(100):
        engine.offer(ev(i * 20, i, "GlassBreak", room=i % 7 + 1, level=1))
    s = engine.profile_stats("s")
    assert s.runs <= 1 and s.expired == 99  # each run outlives its window by one event


def test_buffer_limit_forces_evaluation_and_later_older_events_are_late() -> None:
    p = parse_composite("s: GlassBreak() within 1 s", BUILDING)
    engine = CompositeEngine(matcher="reference",
                             limits=EngineLimits(lateness=100 * S, max_buffered=3))
    engine.add(p)
    out = []
    for i in range(5):
        out.extend(engine.offer(ev(i, i, "GlassBreak", room=1, level=1)))
    assert labels(out) == [("GlassBreak0",), ("GlassBreak1",)]
    assert engine.stats().forced == 2
    assert engine.offer(ev(0.5, 99, "GlassBreak", room=1, level=1)) == []
    assert engine.stats().late == 1


def test_an_equal_profile_added_while_an_event_waits_gets_its_own_automaton() -> None:
    early = parse_composite("early@a: GlassBreak() within 1 s", BUILDING)
    late = parse_composite("late@b: GlassBreak() within 1 s", BUILDING)
    engine = CompositeEngine(matcher="reference")
    engine.add(early)
    out = engine.offer(ev(0, 0, "GlassBreak", room=1, level=1))  # waits for the watermark
    engine.add(late)
    out += engine.offer(ev(5, 1, "GlassBreak", room=1, level=1))
    out += engine.flush()
    assert [(m.profile, m.start.order) for m in out] == [
        ("early", (0,)), ("early", (1,)), ("late", (1,))]
    assert engine.stats().automata == 2


def test_profile_set_errors() -> None:
    p = parse_composite("s: GlassBreak() within 1 s", BUILDING)
    engine = CompositeEngine(matcher="reference")
    engine.add(p)
    with pytest.raises(DuplicateProfileError):
        engine.add(p)
    assert "s" in engine and len(engine) == 1 and engine.get("s") == p
    assert engine.remove("s") == p
    assert list(engine.component_profiles()) == [] and len(engine.matcher) == 0
    with pytest.raises(UnknownProfileError):
        engine.remove("s")
    with pytest.raises(ValueError, match="lateness"):
        EngineLimits(lateness=-1)
