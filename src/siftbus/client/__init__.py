"""Client library for the broker network: asyncio :class:`Client` and blocking
:class:`SyncClient`."""

from siftbus.client.aio import (
    Client,
    Notification,
    NotificationBatch,
    NotifyBlock,
    Subscription,
    client_tls,
    connect,
    parse_address,
)
from siftbus.client.sync import SyncClient

__all__ = ["Client", "Notification", "NotificationBatch", "NotifyBlock", "Subscription",
           "SyncClient", "client_tls", "connect", "parse_address"]
