"""Remote access to notification channels over the siftbus wire protocol.

Server side: :class:`ChannelService` (the facade: method name and arguments -> result),
its push hub (:mod:`~siftbus.channel.remote.hub`) and :class:`ChannelServer` (standalone;
or :func:`register_with_broker` to host the service in a broker). Client side:
:class:`ChannelClient`, :class:`BrokerChannelClient`, :class:`RemoteConsumer`,
:class:`RemoteSupplier` and :class:`RemotePushConsumer`.
"""

from siftbus.channel.remote.client import (
    BrokerChannelClient,
    ChannelClient,
    RemoteConsumer,
    RemoteSupplier,
    error_from_reply,
)
from siftbus.channel.remote.protocol import SERVICE_NAME
from siftbus.channel.remote.push_consumer import PushRouter, RemotePushConsumer, event_of_wire
from siftbus.channel.remote.server import ChannelServer, register_with_broker, serve
from siftbus.channel.remote.service import ChannelService

__all__ = [
    "SERVICE_NAME",
    "BrokerChannelClient",
    "ChannelClient",
    "ChannelServer",
    "ChannelService",
    "PushRouter",
    "RemoteConsumer",
    "RemotePushConsumer",
    "RemoteSupplier",
    "error_from_reply",
    "event_of_wire",
    "register_with_broker",
    "serve",
]
