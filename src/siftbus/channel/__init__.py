"""The notification-service layer: the CORBA Notification Service 1.1 model on siftbus.

Channels with supplier and consumer admins, push/pull proxies for any, structured and
sequence events, ETCL filter objects (conjunctive ones compiled to siftbus profiles and
matched through the index), mapping filters, QoS, a durable SQLite store, and a
service for remote access (:mod:`siftbus.channel.remote`). See docs/channels.md.

Modules, lowest first: ``event`` (StructuredEvent), ``envelope`` (an event inside the
channel), ``queue`` (one consumer's queue), ``terms`` (priority and lifetime per
consumer), ``filter`` (filter objects), ``state`` (the records objects save and restore
themselves from), ``store`` (SQLite), ``node``, ``proxy/``, ``admin``,
``consumer_filters``, ``dispatch``, ``channel``, ``factory``, ``typed_interface`` and
``typed`` (the typed event channel), ``remote/``.
"""

from siftbus.channel.admin import ConsumerAdmin, SupplierAdmin
from siftbus.channel.channel import EventChannel
from siftbus.channel.event import StructuredEvent
from siftbus.channel.factory import EventChannelFactory
from siftbus.channel.filter import (
    GRAMMAR,
    ConstraintExp,
    ConstraintInfo,
    Filter,
    FilterFactory,
    MappingFilter,
)
from siftbus.channel.proxy import (
    ALL_NOW_UPDATES_OFF,
    ALL_NOW_UPDATES_ON,
    ANY_EVENT,
    NONE_NOW_UPDATES_OFF,
    NONE_NOW_UPDATES_ON,
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    ProxyConsumer,
    ProxyPullConsumer,
    ProxyPullSupplier,
    ProxyPushConsumer,
    ProxyPushSupplier,
    ProxySupplier,
    SequenceProxyPullConsumer,
    SequenceProxyPullSupplier,
    SequenceProxyPushConsumer,
    SequenceProxyPushSupplier,
    StructuredProxyPullConsumer,
    StructuredProxyPullSupplier,
    StructuredProxyPushConsumer,
    StructuredProxyPushSupplier,
)
from siftbus.channel.qos import AND_OP, OR_OP
from siftbus.channel.stats import ChannelStats
from siftbus.channel.store import ChannelStore
from siftbus.channel.typed import TypedEventChannel
from siftbus.channel.typed_interface import TypedEvent
from siftbus.errors import (
    AdminLimitExceeded,
    AdminNotFound,
    AlreadyConnected,
    CallbackNotFound,
    ChannelError,
    ChannelNotFound,
    ClientTypeError,
    ConnectionAlreadyActive,
    ConnectionAlreadyInactive,
    ConstraintNotFound,
    Disconnected,
    FilterNotFound,
    ImplLimit,
    InvalidConstraint,
    InvalidGrammar,
    NotConnected,
    ObjectNotExist,
    PropertyError,
    ProxyNotFound,
    TypedEventError,
    UnknownOperation,
    UnsupportedAdmin,
    UnsupportedFilterableData,
    UnsupportedQoS,
)

__all__ = [
    "ALL_NOW_UPDATES_OFF",
    "ALL_NOW_UPDATES_ON",
    "AND_OP",
    "ANY_EVENT",
    "GRAMMAR",
    "NONE_NOW_UPDATES_OFF",
    "NONE_NOW_UPDATES_ON",
    "OR_OP",
    "SEQUENCE_EVENT",
    "STRUCTURED_EVENT",
    "AdminLimitExceeded",
    "AdminNotFound",
    "AlreadyConnected",
    "CallbackNotFound",
    "ChannelError",
    "ChannelNotFound",
    "ChannelStats",
    "ChannelStore",
    "ClientTypeError",
    "ConnectionAlreadyActive",
    "ConnectionAlreadyInactive",
    "ConstraintExp",
    "ConstraintInfo",
    "ConstraintNotFound",
    "ConsumerAdmin",
    "Disconnected",
    "EventChannel",
    "EventChannelFactory",
    "Filter",
    "FilterFactory",
    "FilterNotFound",
    "ImplLimit",
    "InvalidConstraint",
    "InvalidGrammar",
    "MappingFilter",
    "NotConnected",
    "ObjectNotExist",
    "PropertyError",
    "ProxyConsumer",
    "ProxyNotFound",
    "ProxyPullConsumer",
    "ProxyPullSupplier",
    "ProxyPushConsumer",
    "ProxyPushSupplier",
    "ProxySupplier",
    "SequenceProxyPullConsumer",
    "SequenceProxyPullSupplier",
    "SequenceProxyPushConsumer",
    "SequenceProxyPushSupplier",
    "StructuredEvent",
    "StructuredProxyPullConsumer",
    "StructuredProxyPullSupplier",
    "StructuredProxyPushConsumer",
    "StructuredProxyPushSupplier",
    "SupplierAdmin",
    "TypedEvent",
    "TypedEventChannel",
    "TypedEventError",
    "UnknownOperation",
    "UnsupportedAdmin",
    "UnsupportedFilterableData",
    "UnsupportedQoS",
]
