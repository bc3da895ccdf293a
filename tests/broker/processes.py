"""Real ``siftbus`` processes for tests: free ports on 127.0.0.1, a network config for a
line of brokers, ``python -m siftbus ARGS``, and one ``siftbus broker`` process whose
resident memory is sampled. Shared by the CLI, broker and security tests."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
BUILDING = ROOT / "examples" / "building"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def config_text(ports: list[int], protocol: str = "forwarding", extra: str = "") -> str:
    lines = ["[network]", f'schema = "{BUILDING / "schema.toml"}"', f'protocol = "{protocol}"',
             extra, ""]
    for i, port in enumerate(ports):
        lines += [f"[brokers.B{i}]", f"port = {port}"]
        if i:
            lines.append(f'neighbours = ["B{(i - 1) // 2}"]')
        lines.append("")
    return "\n".join(lines)


def interrupt(proc: subprocess.Popen[Any], timeout: float = 20) -> int:
    """Ctrl-C for a foreground command (``siftbus network up``): SIGINT, then SIGKILL if
    it has not exited within ``timeout`` seconds; the exit status."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def run_cli(*args: str, timeout: float = 60, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, **kw)  # type: ignore[call-overload]


class BrokerProcess:
    """``siftbus broker`` in its own process, its resident memory sampled every 20 ms."""

    def __init__(self, tmp_path: Path, limits: str = "") -> None:
        self.port = free_ports(1)[0]
        cfg = tmp_path / "net.toml"
        cfg.write_text(config_text([self.port], extra=limits))
        self.proc = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "-c",
                                      str(cfg), "-n", "B0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert "listening" in self.proc.stdout.readline()
        self.ps = psutil.Process(self.proc.pid)
        self.base = self.ps.memory_info().rss
        self.peak = self.base
        self._sampling = True
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while self._sampling:
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.ps.memory_info().rss)
            time.sleep(0.02)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 2**20

    def stop(self, timeout: float = 15.0) -> tuple[int, float, str]:
        """SIGTERM; returns the exit status, the seconds it took and stderr."""
        self._sampling = False
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            return -9, time.monotonic() - t0, err
        return self.proc.returncode, time.monotonic() - t0, err


@contextlib.contextmanager
def broker_process(tmp_path: Path, limits: str = "") -> Any:
    b = BrokerProcess(tmp_path, limits)
    try:
        yield b
    finally:
        if b.proc.poll() is None:
            b.proc.kill()
            b.proc.communicate()
