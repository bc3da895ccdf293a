"""Issue 31 through a broker network: profiles with ``or``, string tests and anything-but
travel with their text and deliver exactly what the reference predicts; events of
extended types travel as key lists (``wire.extended``), routed by every protocol."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.match.test_residual import SCHEMA, event, profile

from siftbus.broker.simulator import Simulator
from siftbus.errors import SiftbusError
from siftbus.lang.profile import parse_profile
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Profile
from siftbus.wire.profiles import decode_profile, encode_profile


def _travels(p: Profile) -> bool:
    """Whether a broker takes ``p`` from the wire (a drawn ``or`` may normalise past the
    wire's condition limit: a SUB holding it is refused whole, tested elsewhere)."""
    try:
        decode_profile(encode_profile(p), SCHEMA)
    except SiftbusError:
        return False
    return True


NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]
"""Shrinking a failing network run took over five minutes: a failure is shown as found."""

ROUTINGS = [
    {"protocol": "flooding"},
    {"protocol": "forwarding", "strategy": "simple"},
    {"protocol": "forwarding", "strategy": "identity"},
    {"protocol": "forwarding", "strategy": "covering"},
    {"protocol": "forwarding", "strategy": "merging"},
    {"protocol": "forwarding", "strategy": "merging", "imperfect": True},
    {"protocol": "forwarding", "strategy": "covering", "advertisements": True},
    {"protocol": "rendezvous"},
]


@pytest.mark.parametrize("routing", ROUTINGS, ids=lambda r: "-".join(map(str, r.values())))
@settings(max_examples=12, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_network_delivers_what_the_reference_predicts(routing: dict[str, Any],
                                                      data: st.DataObject) -> None:
    """Both types: ``P`` (finite kinds) and ``X`` (optional, nested, array and open-kind
    attributes, whose events travel as key lists): every frame is encoded and decoded."""
    sim = Simulator(SCHEMA, ["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("b", "d")],
                    roundtrip=True, **routing)
    sim.add_client("sub", "c")
    sim.add_client("sub2", "a")
    sim.add_client("pub", "a")
    sim.add_client("pub2", "d")
    if routing.get("advertisements"):
        for pub in ("pub", "pub2"):  # each publisher may publish both types
            sim.advertise(pub, [parse_profile("ax: X()", SCHEMA),
                                parse_profile("ap: P()", SCHEMA)])
    sim.run()
    refs = {"sub": ReferenceMatcher(), "sub2": ReferenceMatcher()}
    for client, ref in refs.items():
        profiles = [p for i in range(data.draw(st.integers(1, 4)))
                    if (p := data.draw(profile(f"p{i}"))) is not None and _travels(p)]
        for p in profiles:
            ref.add(p)
        if profiles:
            sim.subscribe(client, profiles)
    sim.run()
    published = {"pub": data.draw(st.lists(event(), min_size=1, max_size=6)),
                 "pub2": data.draw(st.lists(event(), min_size=0, max_size=3))}
    idents = {pub: sim.publish(pub, events) for pub, events in published.items() if events}
    sim.run()
    for client, ref in refs.items():
        got = sorted((d.profile, d.event) for d in sim.clients[client].deliveries)
        want = sorted((pid, idents[pub][i]) for pub, events in published.items()
                      for i, row in enumerate(ref.match_batch(events)) for pid in row)
        assert got == want, client
        assert not sim.clients[client].errors


def test_temporal_filters_refuse_profiles_they_cannot_answer() -> None:
    from siftbus.errors import ProfileError
    from siftbus.temporal.notification import TemporalFilter

    TemporalFilter(parse_profile("f: P(n = 1)", SCHEMA))
    with pytest.raises(ProfileError, match="temporal subspaces take conjunctions"):
        TemporalFilter(parse_profile('f: P(s suffix "x")', SCHEMA))
