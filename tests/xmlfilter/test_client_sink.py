"""Delivery of XML notifications through siftbus clients and a real broker server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lxml import etree

from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.client import Client
from siftbus.errors import ConfigError
from siftbus.model import parse_schema
from siftbus.xmlfilter import Dispatcher, XmlEventFilter
from siftbus.xmlfilter.output import CLIENT_SINK_SCHEMA, ClientSink

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"


async def test_notifications_published_through_a_broker() -> None:
    schema = parse_schema(CLIENT_SINK_SCHEMA + '\n[Other]\nx = "int[0, 9]"\n')
    server = BrokerServer(BrokerNode("b1", schema))
    await server.start()
    try:
        pub = await Client.connect("127.0.0.1", server.port, name="xmlfilter")
        sub = await Client.connect("127.0.0.1", server.port, name="receiver-4002")
        try:
            s = await sub.subscribe(
                'XmlNotification(receiver = "http://localhost:4002/submit")')
            await sub.ping()
            f = XmlEventFilter()
            f.subscribe_xml((DATA / "appendix6_subscriptions.xml").read_bytes())
            sink = ClientSink(pub)
            notes = await f.publish_to((DATA / "appendix7_message.xml").read_bytes(),
                                       Dispatcher({"HTTP": sink, "HTTPS": sink}))
            await pub.flush()
            n = await asyncio.wait_for(s.get(), 10)
            assert n.event["receiver"] == "http://localhost:4002/submit"
            assert n.event["method"] == "HTTPS"
            assert n.event["event"] == 1
            xml = n.event["xml"]
            assert isinstance(xml, str)
            assert etree.fromstring(xml.encode()).findtext("bizLocation/id") == (
                "urn:com:location:area-01")
            assert xml.encode() == notes[0].xml
            assert sink.stats().delivered == 2
            with pytest.raises(ConfigError, match="must have the attributes"):
                ClientSink(pub, type_name="Other")
            with pytest.raises(ConfigError, match="no event type"):
                ClientSink(pub, type_name="Missing")
        finally:
            await pub.close()
            await sub.close()
    finally:
        await server.close()
