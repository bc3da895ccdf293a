"""The demo's hook: the gateway started in the live broker network's loop (what ``make
demo`` does while the pipeline delivers alarms), on a taken port falling back to a free
one, and stopped with the network so the demo terminates."""

from __future__ import annotations

import socket

import pytest
import requests

from broker_strategies import SCHEMA
from siftbus.cli.demo import start_gateway
from siftbus.spark.demo import LiveNetwork


def test_the_demo_network_gets_a_dashboard_that_stops_with_it() -> None:
    net = LiveNetwork(SCHEMA)
    net.start()
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            gw = start_gateway(net, "B1", busy)
        assert gw.port != busy
        url = gw.url
        snap = requests.get(url + "/api/network", timeout=10).json()
        assert sorted(snap["brokers"]) == ["B0", "B1", "B2"]
        assert all("stats" in s for s in snap["stats"].values())
        page = requests.get(url + "/dashboard", timeout=10)
        assert page.status_code == 200 and "siftbus dashboard" in page.text
    finally:
        net.close()
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "/api/health", timeout=5)
