"""The model layer: schema, domains, events, predicates and profiles (imports nothing of ours
above ``siftbus.errors``)."""

from siftbus.model.constraint import Constraint, IntervalSet, StringConstraint
from siftbus.model.domain import (
    AnyDomain,
    DecimalDomain,
    Domain,
    EnumDomain,
    IntDomain,
    Key,
    StringDomain,
    Value,
    parse_domain,
)
from siftbus.model.event import Event, event_from_dict, iter_event_lines, parse_event, read_events
from siftbus.model.predicate import Extreme, Op, Predicate
from siftbus.model.profile import Condition, Profile, canonical_predicates
from siftbus.model.schema import Attribute, EventType, Schema, load_schema, parse_schema
from siftbus.model.textio import TextLimits, parse_json_line, read_lines, read_toml

__all__ = [
    "AnyDomain",
    "Attribute",
    "Condition",
    "Constraint",
    "DecimalDomain",
    "Domain",
    "EnumDomain",
    "Event",
    "EventType",
    "Extreme",
    "IntDomain",
    "IntervalSet",
    "Key",
    "Op",
    "Predicate",
    "Profile",
    "Schema",
    "StringConstraint",
    "StringDomain",
    "TextLimits",
    "Value",
    "canonical_predicates",
    "event_from_dict",
    "iter_event_lines",
    "load_schema",
    "parse_domain",
    "parse_event",
    "parse_json_line",
    "parse_schema",
    "read_events",
    "read_lines",
    "read_toml",
]
