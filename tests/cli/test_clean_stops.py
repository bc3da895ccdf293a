"""Clean stops of the long-running commands: Ctrl-C gives one line and exit 130 within a
few seconds, with nothing left running; ``network up`` refuses busy ports instead of
announcing a network that is someone else's."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from broker.processes import BUILDING, config_text, free_ports
from siftbus.client import SyncClient

ROOT = Path(__file__).resolve().parents[2]


def _siftbus(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "siftbus", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kw)  # type: ignore[call-overload]


def test_network_up_refuses_busy_ports(tmp_path: Path) -> None:
    ports = free_ports(2)
    cfg = tmp_path / "net.toml"
    cfg.write_text(config_text(ports))
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", ports[1]))
        taken.listen()
        p = _siftbus("network", "up", str(cfg))
        _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    assert err.count("\n") == 1 and f"127.0.0.1:{ports[1]} (broker B1)" in err, err
    assert "in use" in err and "network up" not in err


def test_ctrl_c_on_network_up_prints_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "net.toml"
    cfg.write_text(config_text(free_ports(3)))
    # in its own process group, as a terminal's foreground job: Ctrl-C reaches them all
    p = _siftbus("network", "up", str(cfg), start_new_session=True)
    assert p.stdout is not None
    for _ in range(10):
        if "network up" in p.stdout.readline():
            break
    children = psutil.Process(p.pid).children(recursive=True)
    assert len(children) == 3
    began = time.monotonic()
    import os

    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0 and time.monotonic() - began < 12
    assert err.strip().splitlines() == ["network down: 3 broker(s) stopped"], err
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)


def test_publish_says_how_many_it_sent_before_an_interrupt(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    broker = _siftbus("broker", "--schema", str(BUILDING / "schema.toml"), "--port",
                      str(port))
    try:
        assert broker.stdout is not None and "listening" in broker.stdout.readline()
        pub = _siftbus("publish", "-b", f"127.0.0.1:{port}", "--batch", "100", "-",
                       stdin=subprocess.PIPE)
        assert pub.stdin is not None
        event = json.dumps({"type": "Temperature", "sensor": 1, "room": 2, "value": 20.5})
        pub.stdin.write((event + "\n") * 250)  # two batches of 100 go, 50 wait for more
        pub.stdin.flush()
        with SyncClient.connect(port=port, timeout=20) as c:
            deadline = time.monotonic() + 60
            while c.call("broker", "stats")["events_in"] < 200:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        pub.send_signal(signal.SIGINT)
        _, err = pub.communicate(timeout=20)
        assert pub.returncode == 130
        assert err.strip().splitlines() == [
            f"siftbus: interrupted after publishing 200 event(s) to 127.0.0.1:{port}"], err
    finally:
        broker.terminate()
        broker.wait(20)


@pytest.mark.spark
def test_ctrl_c_during_a_spark_job_stops_it_cleanly(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    line = json.dumps({"type": "Temperature", "sensor": 1, "room": 2, "value": 20.5})
    events.write_text((line + "\n") * 200_000)
    p = _siftbus("pipeline", "run", "--schema", str(BUILDING / "schema.toml"),
                 "--profiles", str(BUILDING / "profiles.txt"), "--events", str(events),
                 "--out", str(tmp_path / "out"), "--no-progress", "--master", "local[1]",
                 start_new_session=True)
    proc = psutil.Process(p.pid)
    deadline = time.monotonic() + 120
    jvm: list[psutil.Process] = []
    while time.monotonic() < deadline and p.poll() is None and not jvm:
        jvm = [c for c in proc.children(recursive=True) if "java" in c.name()]
        time.sleep(0.2)
    assert jvm, "Spark's JVM did not start"
    time.sleep(4)  # the job under way
    import os

    began = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=30)
    took = time.monotonic() - began
    assert p.returncode == 130 and took < 10, (p.returncode, took, err[-2000:])
    assert "Traceback" not in err and "siftbus: interrupted; Spark stopped" in err, err[-3000:]
    time.sleep(0.5)
    assert not any(j.is_running() and j.status() != psutil.STATUS_ZOMBIE for j in jvm)


def test_certs_init_over_a_ca_names_the_real_flag(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "siftbus", "certs", "init", str(tmp_path / "ca")]
    assert subprocess.run(run, capture_output=True, timeout=60, check=False).returncode == 0
    r = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "pass --force to replace it" in r.stderr, r.stderr
    assert "overwrite" not in r.stderr
