"""Composite profile evaluation (docs/composite.md).

``reference`` evaluates the semantics literally (the oracle); ``plan`` compiles a profile
into branch tables; ``automaton`` runs one profile with bounded state; ``engine`` runs
many over one stream, with the reorder buffer for out-of-order arrival.
"""

from siftbus.match.composite.automaton import AutomatonStats, CompositeAutomaton
from siftbus.match.composite.base import (
    CompositeMatch,
    StampedEvent,
    event_time,
    seconds,
    stamp,
)
from siftbus.match.composite.engine import CompositeEngine, EngineLimits, EngineStats
from siftbus.match.composite.plan import Plan, compile_plan
from siftbus.match.composite.reference import reference_matches

__all__ = [
    "AutomatonStats",
    "CompositeAutomaton",
    "CompositeEngine",
    "CompositeMatch",
    "EngineLimits",
    "EngineStats",
    "Plan",
    "StampedEvent",
    "compile_plan",
    "event_time",
    "reference_matches",
    "seconds",
    "stamp",
]
