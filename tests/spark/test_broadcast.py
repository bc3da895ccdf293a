"""What the executors receive (issue 33, target 3): the compiled index of the subscription
set, broadcast once per version -- arrays, no profile text or profile objects for a worker
to parse or rebuild -- and broadcast again when the set changes."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from siftbus.lang.profile import iter_profile_lines
from siftbus.match import ReferenceMatcher, add_all
from siftbus.match.index import CompiledIndex
from siftbus.model import parse_schema
from siftbus.spark.match_stage import index_available, plan_matches
from siftbus.spark.pipeline import Pipeline
from siftbus.spark.subscriptions import ProfileFile, SubscriptionSet
from spark_strategies import events_of

from .jobs import PROFILES_TEXT, SCHEMA_TOML

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not index_available(), reason="no index engine")]

SCHEMA = parse_schema(SCHEMA_TOML)
EVENTS = [{"type": "Temp", "room": r, "value": v, "level": lvl, "name": n}
          for r, v, lvl, n in [(3, 21.5, "LOW", "abc"), (5, 1.0, "HIGH", "ax"),
                               (9, 30.0, "MID", "b")]] + \
         [{"type": "Door", "open": o, "floor": f} for o, f in [(1, 5), (0, 0), (0, 7)]]


def _reference(text: str) -> list[list[str]]:
    # The grammar's profiles, every one asked for every event.
    ps = list(iter_profile_lines(text, SCHEMA))
    return add_all(ReferenceMatcher(), ps).match_batch(events_of(EVENTS, SCHEMA))


def test_executors_get_the_compiled_index_once_per_version(spark: Any, tmp_path: Path) -> None:
    prof = tmp_path / "profiles.txt"
    prof.write_text(PROFILES_TEXT)
    subs = SubscriptionSet(SCHEMA, ProfileFile(prof))
    pipe = Pipeline(spark, SCHEMA, subs, [])
    try:
        bc = pipe.broadcast()
        assert pipe.broadcast() is bc  # the same version is not shipped again
        shipped = pickle.dumps(bc.value, protocol=pickle.HIGHEST_PROTOCOL)
        plan = pickle.loads(shipped)
        assert isinstance(plan.snapshot, CompiledIndex)
        # Arrays only: neither a profile line nor a Profile/Predicate object goes out.
        for line in PROFILES_TEXT.splitlines():
            assert line.split(": ", 1)[1].encode() not in shipped
        assert b"Profile" not in shipped and b"Predicate" not in shipped
        events = events_of(EVENTS, SCHEMA)
        assert plan_matches(plan, events) == _reference(PROFILES_TEXT)

        changed = PROFILES_TEXT + "new@x: Door(open = 0)\n"
        prof.write_text(changed)
        assert subs.refresh() is True
        again = pipe.broadcast()
        assert again is not bc and again.value.version > bc.value.version
        assert plan_matches(again.value, events) == _reference(changed)
        assert any("new" in m for m in plan_matches(again.value, events))
    finally:
        pipe.close()
