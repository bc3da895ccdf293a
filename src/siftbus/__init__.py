"""siftbus: content-based publish/subscribe.

Publishers emit typed events; subscribers register profiles (conjunctive filters on event
content); siftbus delivers each event to exactly the subscribers whose profiles it
satisfies. The public API is what ``__all__`` lists; every other module is internal.
"""

import typing

from siftbus.errors import (
    AccessDenied,
    AuthenticationError,
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
    QuotaExceeded,
    SchemaError,
    SecurityError,
    SiftbusError,
    UnknownProfileError,
    UnsatisfiableProfileError,
    WireError,
    XmlFilterError,
)
from siftbus.lang import (
    ProfileLimits,
    format_profile,
    load_profiles,
    parse_profile,
    parse_profiles,
)
from siftbus.lang.composite import (
    CompositeProfile,
    format_composite,
    load_composites,
    parse_composite,
    parse_composites,
)
from siftbus.match import Matcher, ReferenceMatcher
from siftbus.match.base import Snapshotting
from siftbus.match.composite import CompositeEngine, CompositeMatch, EngineLimits, StampedEvent
from siftbus.match.engines import Capability, make_matcher
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
    TextLimits,
    load_schema,
    parse_event,
    parse_json_line,
    parse_schema,
    read_events,
    read_lines,
)

if typing.TYPE_CHECKING:  # what the lazy names below are, for type checkers and editors
    from siftbus.broker.config import load_network
    from siftbus.broker.node import BrokerNode
    from siftbus.broker.server import BrokerServer
    from siftbus.broker.sessions import SessionLimits, SessionPolicy
    from siftbus.broker.simulator import Simulator
    from siftbus.channel import (
        EventChannel,
        EventChannelFactory,
        Filter,
        MappingFilter,
        StructuredEvent,
    )
    from siftbus.channel.remote import ChannelClient, ChannelService
    from siftbus.client import Client, SessionState, SyncClient, client_tls, connect
    from siftbus.covering import (
        CoveringIndex,
        FilterPoset,
        ForwardingTable,
        PosetForest,
        Relation,
        Update,
        covers,
        equivalent,
        merge,
        merge_set,
        overlaps,
        relation,
    )
    from siftbus.gateway import Gateway, GatewayLimits, GatewayServer
    from siftbus.match.conformance import check_matcher
    from siftbus.match.counting import CountingMatcher
    from siftbus.match.explain import Explanation, explain
    from siftbus.match.index import CompiledIndex, IndexMatcher, MatchCSR, events_to_columns
    from siftbus.security.guard import Guard, check_bind
    from siftbus.security.policy import SecurityPolicy
    from siftbus.security.tls import ContextSet, TLSConfig
    from siftbus.security.tokens import TokenSigner, bearer_token
    from siftbus.spark.composite import composite_matches, composite_stream
    from siftbus.spark.pipeline import Pipeline, run_files
    from siftbus.temporal import (
        Change,
        DoubleForest,
        PersistentNotification,
        PreloadPolicy,
        Semantics,
        TemporalFilter,
        Validity,
    )
    from siftbus.wire.limits import Limits
    from siftbus.xmlfilter import ParallelFilter, XmlEventFilter, XmlNetwork, parse_subscriptions

__version__ = "0.1.0"

# Names whose modules pull in numba or numpy: loaded on first use, so that importing
# siftbus (and every CLI start) stays fast.
_LAZY = {
    "IndexMatcher": "siftbus.match.index",
    "CompiledIndex": "siftbus.match.index",
    "MatchCSR": "siftbus.match.index",
    "events_to_columns": "siftbus.match.index",
    "CountingMatcher": "siftbus.match.counting",
    "check_matcher": "siftbus.match.conformance",
    "covers": "siftbus.covering",
    "equivalent": "siftbus.covering",
    "overlaps": "siftbus.covering",
    "relation": "siftbus.covering",
    "Relation": "siftbus.covering",
    "merge": "siftbus.covering",
    "merge_set": "siftbus.covering",
    "CoveringIndex": "siftbus.covering",
    "FilterPoset": "siftbus.covering",
    "PosetForest": "siftbus.covering",
    "ForwardingTable": "siftbus.covering",
    "Update": "siftbus.covering",
    # temporal subspace matching (persistent notifications, DoubleForest, preloading)
    "DoubleForest": "siftbus.temporal",
    "PersistentNotification": "siftbus.temporal",
    "TemporalFilter": "siftbus.temporal",
    "Semantics": "siftbus.temporal",
    "Validity": "siftbus.temporal",
    "Change": "siftbus.temporal",
    "PreloadPolicy": "siftbus.temporal",
    # broker network and its client library
    "BrokerNode": "siftbus.broker.node",
    "BrokerServer": "siftbus.broker.server",
    "Simulator": "siftbus.broker.simulator",
    "load_network": "siftbus.broker.config",
    "Client": "siftbus.client",
    "SyncClient": "siftbus.client",
    "connect": "siftbus.client",
    "Limits": "siftbus.wire.limits",
    "client_tls": "siftbus.client",
    # sessions and mobility (docs/mobility.md)
    "SessionState": "siftbus.client",
    "SessionPolicy": "siftbus.broker.sessions",
    "SessionLimits": "siftbus.broker.sessions",
    # security: TLS, principals, rights, quotas (docs/security.md)
    "SecurityPolicy": "siftbus.security.policy",
    "Guard": "siftbus.security.guard",
    "TLSConfig": "siftbus.security.tls",
    "ContextSet": "siftbus.security.tls",
    "TokenSigner": "siftbus.security.tokens",
    "bearer_token": "siftbus.security.tokens",
    "check_bind": "siftbus.security.guard",
    # notification channels (CORBA Notification Service model, ETCL filters)
    "EventChannelFactory": "siftbus.channel",
    "EventChannel": "siftbus.channel",
    "StructuredEvent": "siftbus.channel",
    "Filter": "siftbus.channel",
    "MappingFilter": "siftbus.channel",
    "ChannelService": "siftbus.channel.remote",
    "ChannelClient": "siftbus.channel.remote",
    # XML event filter
    "XmlEventFilter": "siftbus.xmlfilter",
    "ParallelFilter": "siftbus.xmlfilter",
    "XmlNetwork": "siftbus.xmlfilter",
    "parse_subscriptions": "siftbus.xmlfilter",
    # Spark pipeline (imports pyspark when first used)
    "Pipeline": "siftbus.spark.pipeline",
    "run_files": "siftbus.spark.pipeline",
    # why an event matches a profile or not
    "explain": "siftbus.match.explain",
    "Explanation": "siftbus.match.explain",
    # HTTP/WebSocket gateway (imports FastAPI when first used)
    "Gateway": "siftbus.gateway",
    "GatewayLimits": "siftbus.gateway",
    "GatewayServer": "siftbus.gateway",
    "composite_matches": "siftbus.spark.composite",
    "composite_stream": "siftbus.spark.composite",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'siftbus' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

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
    # reading text input: one rule for line files, safe JSON, limits
    "TextLimits",
    "read_lines",
    "parse_json_line",
    # languages
    "ProfileLimits",
    "format_profile",
    "load_profiles",
    "parse_profile",
    "parse_profiles",
    "CompositeProfile",
    "format_composite",
    "load_composites",
    "parse_composite",
    "parse_composites",
    # matching
    "Matcher",
    "ReferenceMatcher",
    "IndexMatcher",
    "CountingMatcher",
    "CompiledIndex",
    "MatchCSR",
    "events_to_columns",
    "check_matcher",
    "make_matcher",
    "Capability",
    "Snapshotting",
    "CompositeEngine",
    "CompositeMatch",
    "EngineLimits",
    "StampedEvent",
    # covering and routing tables
    "covers",
    "equivalent",
    "overlaps",
    "relation",
    "Relation",
    "merge",
    "merge_set",
    "CoveringIndex",
    "FilterPoset",
    "PosetForest",
    "ForwardingTable",
    "Update",
    # temporal subspace matching
    "DoubleForest",
    "PersistentNotification",
    "TemporalFilter",
    "Semantics",
    "Validity",
    "Change",
    "PreloadPolicy",
    # broker network and client library
    "BrokerNode",
    "BrokerServer",
    "Simulator",
    "load_network",
    "Client",
    "SyncClient",
    "connect",
    "Limits",
    "client_tls",
    # sessions and mobility
    "SessionState",
    "SessionPolicy",
    "SessionLimits",
    # security
    "SecurityPolicy",
    "Guard",
    "TLSConfig",
    "ContextSet",
    "TokenSigner",
    "bearer_token",
    "check_bind",
    # notification channels
    "EventChannelFactory",
    "EventChannel",
    "StructuredEvent",
    "Filter",
    "MappingFilter",
    "ChannelService",
    "ChannelClient",
    # XML event filter
    "XmlEventFilter",
    "ParallelFilter",
    "XmlNetwork",
    # the HTTP gateway and explanations
    "Gateway",
    "GatewayLimits",
    "GatewayServer",
    "explain",
    "Explanation",
    "parse_subscriptions",
    # Spark pipeline
    "Pipeline",
    "run_files",
    "composite_matches",
    "composite_stream",
    # errors
    "AccessDenied",
    "AuthenticationError",
    "QuotaExceeded",
    "SecurityError",
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
