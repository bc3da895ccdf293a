"""The engine registry: every declared capability is true of the matchers it builds."""

from __future__ import annotations

import pytest

from siftbus.match.base import BulkLoading, Matcher, Snapshotting
from siftbus.match.engines import (
    DEFAULT_ENGINE,
    ENGINES,
    Capability,
    Engine,
    engine,
    make_matcher,
    names,
    register,
)
from siftbus.match.index import IndexMatcher
from siftbus.match.reference import ReferenceMatcher

PROTOCOL = {Capability.SNAPSHOT: Snapshotting, Capability.BULK: BulkLoading}


@pytest.mark.parametrize("name", list(ENGINES))
def test_declared_capabilities_hold(name: str) -> None:
    entry = engine(name)
    m = entry.make()
    assert isinstance(m, Matcher)
    for cap, proto in PROTOCOL.items():
        assert isinstance(m, proto) == entry.has(cap), (name, cap)


def test_default_and_lookup() -> None:
    assert DEFAULT_ENGINE == "index"
    assert isinstance(make_matcher(), IndexMatcher)
    assert {"index", "counting", "reference"} <= set(ENGINES)
    assert names(Capability.ORACLE) == ("reference",)
    assert set(names(Capability.SNAPSHOT)) == {"index", "reference"}
    with pytest.raises(ValueError, match="unknown engine 'nope'; choose one of index"):
        engine("nope")
    with pytest.raises(ValueError, match="'counting' has no snapshot capability; choose one "
                                         "of index, reference"):
        engine("counting", needs=Capability.SNAPSHOT)


def test_register_refuses_a_taken_name() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(Engine("reference", "again", frozenset(), ReferenceMatcher))
    with pytest.raises(TypeError):
        ENGINES["x"] = ENGINES["index"]  # type: ignore[index]
