"""Fixtures the channel tests share: a channel server on 127.0.0.1 port 0 (in this
process) and a client connected to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from siftbus.channel import EventChannelFactory
from siftbus.channel.remote import ChannelClient, ChannelServer

from .servers import serving


@pytest.fixture
async def server() -> AsyncIterator[ChannelServer]:
    async with serving(EventChannelFactory()) as srv:
        yield srv


@pytest.fixture
async def client(server: ChannelServer) -> AsyncIterator[ChannelClient]:
    c = await ChannelClient.connect("127.0.0.1", server.port)
    yield c
    await c.close()
