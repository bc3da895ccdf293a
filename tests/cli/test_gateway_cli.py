"""``siftbus gateway`` as a user runs it: against a running network it serves until
stopped; every bad start (config, broker name, limit, unreachable broker, busy port) is
one error line and exit 2."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from broker_strategies import SCHEMA
from gateway.servers import NetworkThread, network_text
from hostile import ROOT, run_bad


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("gw")
    (d / "schema.toml").write_text(SCHEMA.to_toml())
    with NetworkThread() as gn:
        ports = {n: s.port for n, s in gn.brokers.items()}
        text = network_text(ports).replace("[network]\n", '[network]\nschema = "schema.toml"\n')
        (d / "net.toml").write_text(text)
        yield d / "net.toml"


def test_the_gateway_serves_until_stopped(config: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "siftbus", "gateway", "-c", str(config),
                             "-n", "B2", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("gateway of broker B2 at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        assert requests.get(url + "/api/health", timeout=10).json()["broker"] == "B2"
        r = requests.post(url + "/api/publish", json={"type": "U", "x": 1}, timeout=10)
        assert r.json()["published"] == 1
        assert "siftbus_gateway_events_published_total" in requests.get(
            url + "/metrics", timeout=10).text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_bad_starts_are_one_error_line(config: Path, tmp_path: Path) -> None:
    base = ["gateway", "-c", str(config), "--port", "0", "--duration", "5"]
    assert "no broker 'B9'" in run_bad([*base, "-n", "B9"])
    assert "max_body" in run_bad([*base, "-n", "B1", "--max-body", "0"])
    assert "request_timeout" in run_bad([*base, "-n", "B1", "--request-timeout", "-1"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[network\n")
    run_bad(["gateway", "-c", str(bad), "-n", "B1"])
    # a broker that is not running
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    down = tmp_path / "down.toml"
    (tmp_path / "schema.toml").write_text(SCHEMA.to_toml())
    down.write_text(f'[network]\nschema = "schema.toml"\n[brokers.B1]\nport = {free}\n')
    assert "cannot connect to broker" in run_bad(["gateway", "-c", str(down), "-n", "B1",
                                                  "--port", "0"])
    # a busy port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert "cannot listen" in run_bad([*base[:3], "-n", "B1", "--port", str(busy)])
