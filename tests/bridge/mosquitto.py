"""A real mosquitto on 127.0.0.1 (an ephemeral port) and its command-line clients, for
the MQTT bridge's tests (Debian's ``mosquitto`` and ``mosquitto-clients``, installed by
``make sysdeps-mqtt``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from broker.processes import free_ports

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
INSTALL = "mosquitto is not installed: run `make sysdeps-mqtt` (apt-get install mosquitto " \
          "mosquitto-clients)"


class Mosquitto:
    """A mosquitto on a fixed free loopback port that can be stopped and started again
    (``persistence``: its sessions and retained messages survive the restart)."""

    def __init__(self, tmp_path: Path, *, persistence: bool = False) -> None:
        assert Path(MOSQUITTO).exists() and shutil.which("mosquitto_pub"), INSTALL
        self.port = free_ports(1)[0]
        self.conf = tmp_path / "mosquitto.conf"
        text = (f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
                "max_inflight_messages 1000\nmax_queued_messages 100000\n")
        if persistence:
            text += f"persistence true\npersistence_location {tmp_path}/\n"
        self.conf.write_text(text)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "exited"
            assert time.monotonic() < deadline, "mosquitto did not listen within 10 s"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()  # SIGTERM: a persistent mosquitto saves its state
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@contextmanager
def mosquitto(tmp_path: Path) -> Iterator[int]:
    """A mosquitto listening on a free loopback port; yields the port."""
    m = Mosquitto(tmp_path)
    m.start()
    try:
        yield m.port
    finally:
        m.stop()


def publish(port: int, topic: str, payloads: Iterable[str], *, retain: bool = False) -> None:
    """``mosquitto_pub`` with QoS 1, one message per payload (one process per topic);
    returns when mosquitto has acknowledged every one."""
    lines = list(payloads)
    if not lines:
        return
    args = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic]
    if retain:
        args.append("-r")
    if len(lines) == 1:
        cmd = [*args, "-m", lines[0]] if lines[0] else [*args, "-n"]
        subprocess.run(cmd, check=True, timeout=20)
    else:
        subprocess.run([*args, "-l"], input="\n".join(lines) + "\n", text=True, check=True,
                       timeout=20)


class Subscriber:
    """``mosquitto_sub -v -q 1`` on a topic filter; every message it prints, parsed."""

    def __init__(self, port: int, topic: str) -> None:
        self.proc = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-v",
             "-t", topic, "-i", f"test-sub-{port}", "-c"],
            stdout=subprocess.PIPE, text=True)
        self.messages: list[tuple[str, Any]] = []
        self.probes = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            topic, _, payload = line.rstrip("\n").partition(" ")
            if topic.endswith("/_probe"):
                self.probes += 1
                continue
            self.messages.append((topic, json.loads(payload)))

    def ready(self, port: int, probe: str, timeout: float = 10.0) -> None:
        """Wait until the subscription is active: a message on ``probe`` (a topic the
        filter matches, ending in ``/_probe``: not kept) has come back."""
        deadline = time.monotonic() + timeout
        while not self.probes:
            assert time.monotonic() < deadline, "mosquitto_sub did not subscribe"
            publish(port, probe, ['{"probe": true}'])
            time.sleep(0.1)

    def wait_for(self, n: int, timeout: float = 30.0) -> None:
        """Until at least ``n`` messages came, then a little longer (to see extras)."""
        deadline = time.monotonic() + timeout
        while len(self.messages) < n:
            assert time.monotonic() < deadline, f"{len(self.messages)} of {n} messages"
            time.sleep(0.05)
        time.sleep(0.5)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._thread.join(5)
