"""siftbus: content-based publish/subscribe.

Publishers emit typed events; subscribers register profiles (conjunctive filters on event
content); siftbus delivers each event to exactly the subscribers whose profiles it
satisfies. The public API is what ``__all__`` lists; every other module is internal.
"""

import importlib
import typing

if typing.TYPE_CHECKING:  # the same names for type checkers (`as`: re-exported; tested)
    from siftbus.broker.config import load_network as load_network
    from siftbus.broker.node import BrokerNode as BrokerNode
    from siftbus.broker.server import BrokerServer as BrokerServer
    from siftbus.broker.sessions import (
        SessionLimits as SessionLimits,
        SessionPolicy as SessionPolicy,
    )
    from siftbus.broker.simulator import Simulator as Simulator
    from siftbus.channel import (
        EventChannel as EventChannel,
        EventChannelFactory as EventChannelFactory,
        Filter as Filter,
        MappingFilter as MappingFilter,
        StructuredEvent as StructuredEvent,
    )
    from siftbus.channel.remote import (
        ChannelClient as ChannelClient,
        ChannelService as ChannelService,
    )
    from siftbus.client import (
        Client as Client,
        SessionState as SessionState,
        SyncClient as SyncClient,
        client_tls as client_tls,
        connect as connect,
    )
    from siftbus.covering import (
        CoveringIndex as CoveringIndex,
        FilterPoset as FilterPoset,
        ForwardingTable as ForwardingTable,
        PosetForest as PosetForest,
        Relation as Relation,
        Update as Update,
        covers as covers,
        equivalent as equivalent,
        merge as merge,
        merge_set as merge_set,
        overlaps as overlaps,
        relation as relation,
    )
    from siftbus.errors import (
        AccessDenied as AccessDenied,
        AuthenticationError as AuthenticationError,
        ConfigError as ConfigError,
        ConnectionLostError as ConnectionLostError,
        ConstraintError as ConstraintError,
        DomainError as DomainError,
        DuplicateProfileError as DuplicateProfileError,
        EnvironmentProblem as EnvironmentProblem,
        EventError as EventError,
        InputError as InputError,
        ProfileError as ProfileError,
        ProfileSyntaxError as ProfileSyntaxError,
        QuotaExceeded as QuotaExceeded,
        SchemaError as SchemaError,
        SecurityError as SecurityError,
        SiftbusError as SiftbusError,
        UnknownProfileError as UnknownProfileError,
        UnsatisfiableProfileError as UnsatisfiableProfileError,
        WireError as WireError,
        XmlFilterError as XmlFilterError,
    )
    from siftbus.gateway import (
        Gateway as Gateway,
        GatewayLimits as GatewayLimits,
        GatewayServer as GatewayServer,
    )
    from siftbus.lang import (
        ProfileLimits as ProfileLimits,
        format_profile as format_profile,
        load_profiles as load_profiles,
        parse_profile as parse_profile,
        parse_profiles as parse_profiles,
    )
    from siftbus.lang.composite import (
        CompositeProfile as CompositeProfile,
        format_composite as format_composite,
        load_composites as load_composites,
        parse_composite as parse_composite,
        parse_composites as parse_composites,
    )
    from siftbus.match import Matcher as Matcher, ReferenceMatcher as ReferenceMatcher
    from siftbus.match.base import Snapshotting as Snapshotting
    from siftbus.match.composite import (
        CompositeEngine as CompositeEngine,
        CompositeMatch as CompositeMatch,
        EngineLimits as EngineLimits,
        StampedEvent as StampedEvent,
    )
    from siftbus.match.conformance import check_matcher as check_matcher
    from siftbus.match.counting import CountingMatcher as CountingMatcher
    from siftbus.match.engines import Capability as Capability, make_matcher as make_matcher
    from siftbus.match.explain import Explanation as Explanation, explain as explain
    from siftbus.match.index import (
        CompiledIndex as CompiledIndex,
        IndexMatcher as IndexMatcher,
        MatchCSR as MatchCSR,
        events_to_columns as events_to_columns,
    )
    from siftbus.model import (
        DecimalDomain as DecimalDomain,
        EnumDomain as EnumDomain,
        Event as Event,
        EventType as EventType,
        IntDomain as IntDomain,
        IntervalSet as IntervalSet,
        Op as Op,
        Predicate as Predicate,
        Profile as Profile,
        Schema as Schema,
        StringConstraint as StringConstraint,
        StringDomain as StringDomain,
        TextLimits as TextLimits,
        load_schema as load_schema,
        parse_event as parse_event,
        parse_json_line as parse_json_line,
        parse_schema as parse_schema,
        read_events as read_events,
        read_lines as read_lines,
    )
    from siftbus.security.guard import Guard as Guard, check_bind as check_bind
    from siftbus.security.policy import SecurityPolicy as SecurityPolicy
    from siftbus.security.tls import ContextSet as ContextSet, TLSConfig as TLSConfig
    from siftbus.security.tokens import (
        TokenSigner as TokenSigner,
        bearer_token as bearer_token,
    )
    from siftbus.spark.composite import (
        composite_matches as composite_matches,
        composite_stream as composite_stream,
    )
    from siftbus.spark.pipeline import Pipeline as Pipeline, run_files as run_files
    from siftbus.temporal import (
        Change as Change,
        DoubleForest as DoubleForest,
        PersistentNotification as PersistentNotification,
        PreloadPolicy as PreloadPolicy,
        Semantics as Semantics,
        TemporalFilter as TemporalFilter,
        Validity as Validity,
    )
    from siftbus.wire.limits import Limits as Limits
    from siftbus.xmlfilter import (
        ParallelFilter as ParallelFilter,
        XmlEventFilter as XmlEventFilter,
        XmlNetwork as XmlNetwork,
        parse_subscriptions as parse_subscriptions,
    )

__version__ = "0.1.0"

# The public API, one entry per name: the module that defines it. Nothing is imported
# until first used, so `import siftbus` (and every CLI start) stays fast whatever a
# layer pulls in (numba, pyspark, lxml).
_EXPORTS: dict[str, str] = {
    # model: schema, events, profiles
    "DecimalDomain": "siftbus.model",
    "EnumDomain": "siftbus.model",
    "Event": "siftbus.model",
    "EventType": "siftbus.model",
    "IntDomain": "siftbus.model",
    "IntervalSet": "siftbus.model",
    "Op": "siftbus.model",
    "Predicate": "siftbus.model",
    "Profile": "siftbus.model",
    "Schema": "siftbus.model",
    "StringConstraint": "siftbus.model",
    "StringDomain": "siftbus.model",
    "load_schema": "siftbus.model",
    "parse_event": "siftbus.model",
    "parse_schema": "siftbus.model",
    "read_events": "siftbus.model",
    # reading text input: one rule for line files, safe JSON, limits
    "TextLimits": "siftbus.model",
    "read_lines": "siftbus.model",
    "parse_json_line": "siftbus.model",
    # languages
    "ProfileLimits": "siftbus.lang",
    "format_profile": "siftbus.lang",
    "load_profiles": "siftbus.lang",
    "parse_profile": "siftbus.lang",
    "parse_profiles": "siftbus.lang",
    "CompositeProfile": "siftbus.lang.composite",
    "format_composite": "siftbus.lang.composite",
    "load_composites": "siftbus.lang.composite",
    "parse_composite": "siftbus.lang.composite",
    "parse_composites": "siftbus.lang.composite",
    # matching
    "Matcher": "siftbus.match",
    "ReferenceMatcher": "siftbus.match",
    "IndexMatcher": "siftbus.match.index",
    "CountingMatcher": "siftbus.match.counting",
    "CompiledIndex": "siftbus.match.index",
    "MatchCSR": "siftbus.match.index",
    "events_to_columns": "siftbus.match.index",
    "check_matcher": "siftbus.match.conformance",
    "make_matcher": "siftbus.match.engines",
    "Capability": "siftbus.match.engines",
    "Snapshotting": "siftbus.match.base",
    "CompositeEngine": "siftbus.match.composite",
    "CompositeMatch": "siftbus.match.composite",
    "EngineLimits": "siftbus.match.composite",
    "StampedEvent": "siftbus.match.composite",
    # covering and routing tables
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
    # temporal subspace matching
    "DoubleForest": "siftbus.temporal",
    "PersistentNotification": "siftbus.temporal",
    "TemporalFilter": "siftbus.temporal",
    "Semantics": "siftbus.temporal",
    "Validity": "siftbus.temporal",
    "Change": "siftbus.temporal",
    "PreloadPolicy": "siftbus.temporal",
    # broker network and client library
    "BrokerNode": "siftbus.broker.node",
    "BrokerServer": "siftbus.broker.server",
    "Simulator": "siftbus.broker.simulator",
    "load_network": "siftbus.broker.config",
    "Client": "siftbus.client",
    "SyncClient": "siftbus.client",
    "connect": "siftbus.client",
    "Limits": "siftbus.wire.limits",
    "client_tls": "siftbus.client",
    # sessions and mobility
    "SessionState": "siftbus.client",
    "SessionPolicy": "siftbus.broker.sessions",
    "SessionLimits": "siftbus.broker.sessions",
    # security
    "SecurityPolicy": "siftbus.security.policy",
    "Guard": "siftbus.security.guard",
    "TLSConfig": "siftbus.security.tls",
    "ContextSet": "siftbus.security.tls",
    "TokenSigner": "siftbus.security.tokens",
    "bearer_token": "siftbus.security.tokens",
    "check_bind": "siftbus.security.guard",
    # notification channels
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
    # the HTTP gateway and explanations
    "Gateway": "siftbus.gateway",
    "GatewayLimits": "siftbus.gateway",
    "GatewayServer": "siftbus.gateway",
    "explain": "siftbus.match.explain",
    "Explanation": "siftbus.match.explain",
    "parse_subscriptions": "siftbus.xmlfilter",
    # Spark pipeline
    "Pipeline": "siftbus.spark.pipeline",
    "run_files": "siftbus.spark.pipeline",
    "composite_matches": "siftbus.spark.composite",
    "composite_stream": "siftbus.spark.composite",
    # errors
    "AccessDenied": "siftbus.errors",
    "AuthenticationError": "siftbus.errors",
    "QuotaExceeded": "siftbus.errors",
    "SecurityError": "siftbus.errors",
    "ConfigError": "siftbus.errors",
    "ConnectionLostError": "siftbus.errors",
    "ConstraintError": "siftbus.errors",
    "DomainError": "siftbus.errors",
    "DuplicateProfileError": "siftbus.errors",
    "EnvironmentProblem": "siftbus.errors",
    "EventError": "siftbus.errors",
    "InputError": "siftbus.errors",
    "ProfileError": "siftbus.errors",
    "ProfileSyntaxError": "siftbus.errors",
    "SchemaError": "siftbus.errors",
    "SiftbusError": "siftbus.errors",
    "UnknownProfileError": "siftbus.errors",
    "UnsatisfiableProfileError": "siftbus.errors",
    "WireError": "siftbus.errors",
    "XmlFilterError": "siftbus.errors",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'siftbus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
