"""Issue 31 through a broker network: profiles with ``or``, string tests and anything-but
travel with their text and deliver exactly what the reference predicts; events of
extended types are refused by the wire with a clear error (no wire form yet)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.match.test_residual import SCHEMA, event, profile

from siftbus.broker.simulator import Simulator
from siftbus.errors import WireError
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import event_from_dict


@pytest.mark.parametrize("protocol", ["forwarding", "flooding"])
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_network_delivers_what_the_reference_predicts(protocol: str,
                                                      data: st.DataObject) -> None:
    sim = Simulator(SCHEMA, ["a", "b", "c"], [("a", "b"), ("b", "c")], protocol=protocol,
                    roundtrip=True)
    sim.add_client("sub", "c")
    sim.add_client("pub", "a")
    sim.run()
    ref = ReferenceMatcher()
    profiles = [p for i in range(data.draw(st.integers(1, 4)))
                if (p := data.draw(profile(f"p{i}"))) is not None and p.type_name == "P"]
    if not profiles:
        return
    for p in profiles:
        ref.add(p)
    sim.subscribe("sub", profiles)
    sim.run()
    events = [e for e in data.draw(st.lists(event(), min_size=1, max_size=6))
              if e.type_name == "P"]
    if not events:
        return
    sim.publish("pub", events)
    sim.run()
    got = sorted((d.profile, d.event[1]) for d in sim.clients["sub"].deliveries)
    want = sorted((pid, i) for i, row in enumerate(ref.match_batch(events)) for pid in row)
    assert got == want


def test_extended_events_are_refused_by_the_wire() -> None:
    sim = Simulator(SCHEMA, ["a"], [])
    sim.add_client("pub", "a")
    sim.run()
    e = event_from_dict({"type": "X", "n": 1, "s": "a", "tags": ["t"], "c": {"tier": "A"}},
                        SCHEMA)
    with pytest.raises(WireError, match="do not travel between brokers yet"):
        sim.publish("pub", [e])


def test_temporal_filters_refuse_profiles_they_cannot_answer() -> None:
    from siftbus.errors import ProfileError
    from siftbus.lang.profile import parse_profile
    from siftbus.temporal.notification import TemporalFilter

    TemporalFilter(parse_profile("f: P(n = 1)", SCHEMA))
    with pytest.raises(ProfileError, match="temporal subspaces take conjunctions"):
        TemporalFilter(parse_profile('f: P(s suffix "x")', SCHEMA))
