"""Proxies: ProxySuppliers serve consumers (push or pull), ProxyConsumers serve suppliers
(push or pull), each for ANY_EVENT, STRUCTURED_EVENT or SEQUENCE_EVENT clients."""

from siftbus.channel.proxy.base import (
    ALL_NOW_UPDATES_OFF,
    ALL_NOW_UPDATES_ON,
    ANY_EVENT,
    CLIENT_TYPES,
    NONE_NOW_UPDATES_OFF,
    NONE_NOW_UPDATES_ON,
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    Proxy,
)
from siftbus.channel.proxy.consumer import (
    ProxyConsumer,
    ProxyPullConsumer,
    ProxyPushConsumer,
    PullProxyConsumer,
    PushProxyConsumer,
    SequenceProxyPullConsumer,
    SequenceProxyPushConsumer,
    StructuredProxyPullConsumer,
    StructuredProxyPushConsumer,
)
from siftbus.channel.proxy.pull_supplier import (
    ProxyPullSupplier,
    PullProxySupplier,
    SequenceProxyPullSupplier,
    StructuredProxyPullSupplier,
)
from siftbus.channel.proxy.push_supplier import (
    ProxyPushSupplier,
    PushProxySupplier,
    SequenceProxyPushSupplier,
    StructuredProxyPushSupplier,
)
from siftbus.channel.proxy.supplier import ProxySupplier

PUSH_SUPPLIERS: dict[str, type[ProxySupplier]] = {
    ANY_EVENT: ProxyPushSupplier, STRUCTURED_EVENT: StructuredProxyPushSupplier,
    SEQUENCE_EVENT: SequenceProxyPushSupplier}
PULL_SUPPLIERS: dict[str, type[ProxySupplier]] = {
    ANY_EVENT: ProxyPullSupplier, STRUCTURED_EVENT: StructuredProxyPullSupplier,
    SEQUENCE_EVENT: SequenceProxyPullSupplier}
PUSH_CONSUMERS: dict[str, type[ProxyConsumer]] = {
    ANY_EVENT: ProxyPushConsumer, STRUCTURED_EVENT: StructuredProxyPushConsumer,
    SEQUENCE_EVENT: SequenceProxyPushConsumer}
PULL_CONSUMERS: dict[str, type[ProxyConsumer]] = {
    ANY_EVENT: ProxyPullConsumer, STRUCTURED_EVENT: StructuredProxyPullConsumer,
    SEQUENCE_EVENT: SequenceProxyPullConsumer}
"""The specification's ClientType -> proxy class, per side and delivery mode (the one
table both ``obtain_*`` and restoring from a store use)."""

__all__ = [
    "ALL_NOW_UPDATES_OFF", "ALL_NOW_UPDATES_ON", "ANY_EVENT", "CLIENT_TYPES",
    "NONE_NOW_UPDATES_OFF", "NONE_NOW_UPDATES_ON", "PULL_CONSUMERS", "PULL_SUPPLIERS",
    "PUSH_CONSUMERS", "PUSH_SUPPLIERS", "SEQUENCE_EVENT", "STRUCTURED_EVENT", "Proxy",
    "ProxyConsumer", "ProxyPullConsumer", "ProxyPullSupplier", "ProxyPushConsumer",
    "ProxyPushSupplier", "ProxySupplier", "PullProxyConsumer", "PullProxySupplier",
    "PushProxyConsumer", "PushProxySupplier", "SequenceProxyPullConsumer",
    "SequenceProxyPullSupplier", "SequenceProxyPushConsumer", "SequenceProxyPushSupplier",
    "StructuredProxyPullConsumer", "StructuredProxyPullSupplier",
    "StructuredProxyPushConsumer", "StructuredProxyPushSupplier",
]
