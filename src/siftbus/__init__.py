"""siftbus: content-based publish/subscribe.

Publishers emit typed events; subscribers register profiles (conjunctive filters on event
content); siftbus delivers each event to exactly the subscribers whose profiles it
satisfies. The public API is what ``__all__`` lists; every other module is internal.
"""

from siftbus.errors import (
    ConfigError,
    ConnectionLostError,
    ConstraintError,
    DomainError,
    DuplicateProfileError,
    EnvironmentProblem,
    EventError,
    InputError,
    ProfileError,
    ProfileSyntaxError,
    SchemaError,
    SiftbusError,
    UnknownProfileError,
    UnsatisfiableProfileError,
    WireError,
    XmlFilterError,
)
from siftbus.lang import format_profile, load_profiles, parse_profile, parse_profiles
from siftbus.match import Matcher, ReferenceMatcher
from siftbus.match.engines import make_matcher
from siftbus.model import (
    DecimalDomain,
    EnumDomain,
    Event,
    EventType,
    IntDomain,
    IntervalSet,
    Op,
    Predicate,
    Profile,
    Schema,
    StringConstraint,
    StringDomain,
    load_schema,
    parse_event,
    parse_schema,
    read_events,
)

__version__ = "0.1.0"

__all__ = [
    # model: schema, events, profiles
    "DecimalDomain",
    "EnumDomain",
    "Event",
    "EventType",
    "IntDomain",
    "IntervalSet",
    "Op",
    "Predicate",
    "Profile",
    "Schema",
    "StringConstraint",
    "StringDomain",
    "load_schema",
    "parse_event",
    "parse_schema",
    "read_events",
    # languages
    "format_profile",
    "load_profiles",
    "parse_profile",
    "parse_profiles",
    # matching
    "Matcher",
    "ReferenceMatcher",
    "make_matcher",
    # errors
    "ConfigError",
    "ConnectionLostError",
    "ConstraintError",
    "DomainError",
    "DuplicateProfileError",
    "EnvironmentProblem",
    "EventError",
    "InputError",
    "ProfileError",
    "ProfileSyntaxError",
    "SchemaError",
    "SiftbusError",
    "UnknownProfileError",
    "UnsatisfiableProfileError",
    "WireError",
    "XmlFilterError",
]
