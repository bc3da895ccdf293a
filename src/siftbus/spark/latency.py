"""Streaming latency as a user sees it: from an event's arrival (its file appearing in a
watched directory, its line sent on a socket) to its live delivery at a broker subscriber.

:func:`measure_stream` runs ``siftbus pipeline stream`` as a user runs it (a fresh process,
``--deliver-broker``), feeds it numbered events at a steady rate in phases, and times each
event at a subscriber of a broker in this process. Every event carries its number in an
attribute (``seq``), so a delivery is matched to its arrival whatever the batch. A first
small feed warms the stream up (Python workers, JIT) and is not counted; each phase is
drained before the next starts, so a phase's figures are its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from siftbus.errors import ConfigError, EnvironmentProblem
from siftbus.lang.profile import parse_profile
from siftbus.model import Schema, load_schema
from siftbus.spark.demo import LiveNetwork


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` (the nearest rank: a value that
    occurred), ``nan`` for none."""
    if not len(values):
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q, method="inverted_cdf"))


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase of a feed at a steady rate."""

    mode: str
    """``watch`` or ``socket``."""
    rate: float
    """Events per second offered."""
    events: int
    delivered: int
    seconds: float
    """First arrival to last delivery."""
    p50: float
    p99: float
    max: float
    spark_p50: float
    """Arrival to publication by the pipeline (the broker's part is the rest)."""
    repeats: int = 0
    """Events delivered more than once (a replayed batch; 0 in a clean run)."""

    @property
    def events_per_s(self) -> float:
        """Events delivered per second, first arrival to last delivery."""
        return self.delivered / self.seconds if self.seconds > 0 else 0.0


class DeliveryClock:
    """Arrival and delivery times per event number (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrived: dict[int, float] = {}
        self.delivered: dict[int, tuple[float, float]] = {}
        """seq -> (received, published by the pipeline)."""
        self.repeats: dict[int, int] = {}
        """seq -> deliveries after the first."""

    def arrive(self, seqs: range, when: float) -> None:
        with self._lock:
            for s in seqs:
                self.arrived[s] = when

    def deliver(self, seq: int, published: float, when: float | None = None) -> None:
        now = time.time() if when is None else when
        with self._lock:
            if seq in self.delivered:
                self.repeats[seq] = self.repeats.get(seq, 0) + 1
            else:
                self.delivered[seq] = (now, published)

    def wait(self, seqs: range, timeout: float) -> bool:
        """Whether every event of ``seqs`` was delivered within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(s in self.delivered for s in seqs):
                    return True
            time.sleep(0.05)
        return False

    def result(self, mode: str, rate: float, seqs: range) -> PhaseResult:
        with self._lock:
            got = [(self.arrived[s], *self.delivered[s]) for s in seqs
                   if s in self.delivered and s in self.arrived]
            repeats = sum(self.repeats.get(s, 0) for s in seqs)
            first = min((self.arrived[s] for s in seqs if s in self.arrived), default=0.0)
        lat = [r - a for a, r, _ in got]
        spark = [p - a for a, _, p in got]
        last = max((r for _, r, _ in got), default=first)
        return PhaseResult(mode, rate, len(seqs), len(got), last - first,
                           percentile(lat, 50), percentile(lat, 99), max(lat, default=0.0),
                           percentile(spark, 50), repeats)


@dataclass(frozen=True, slots=True)
class StreamWorkload:
    """What the stream matches: a schema with an integer ``seq`` attribute on every type,
    the pipeline's profiles, the broker subscriber's profiles (they must let every event
    the pipeline delivers through) and how event ``seq`` reads as a JSON line."""

    schema_text: str
    profiles_text: str
    subscriber_profiles: tuple[str, ...]
    event_line: Callable[[int], str]


@contextlib.contextmanager
def _subscriber(schema: Schema, texts: Sequence[str], clock: DeliveryClock
                ) -> Iterator[LiveNetwork]:
    """One broker in this process and a subscriber that times every delivery."""
    net = LiveNetwork(schema)
    try:
        net.start(("B0",))
        profiles = [parse_profile(t, schema, id=f"latency{i}") for i, t in enumerate(texts)]

        def got(n: Any) -> None:
            clock.deliver(int(n.event["seq"]), float(n.ts))

        net.subscribe("latency", profiles, "B0", on_note=got)
        yield net
    finally:
        net.close()


class _Feeder:
    """Hands numbered events to the stream: files moved into a watched directory, or
    lines on a socket that Spark's socket source connects to."""

    def __init__(self, mode: str, work: Path, line: Callable[[int], str]) -> None:
        self.mode = mode
        self.line = line
        self.watch = work / "in"
        self.watch.mkdir(parents=True, exist_ok=True)
        self._staging = work / "staging"
        self._staging.mkdir(exist_ok=True)
        self._files = 0
        self._server: socket.socket | None = None
        self._conn: socket.socket | None = None
        if mode == "socket":
            self._server = socket.create_server(("127.0.0.1", 0))
            self.port = int(self._server.getsockname()[1])

    def args(self) -> list[str]:
        if self.mode == "socket":
            return ["--socket", f"127.0.0.1:{self.port}"]
        return ["--watch", str(self.watch)]

    def connect(self, timeout: float) -> None:
        """Wait for Spark's socket source to connect (socket mode only)."""
        if self._server is not None:
            self._server.settimeout(timeout)
            try:
                self._conn, _ = self._server.accept()
            except TimeoutError:
                raise EnvironmentProblem("the stream did not connect to the socket in "
                                         f"{timeout:.0f} s") from None

    def send(self, seqs: range, clock: DeliveryClock) -> None:
        data = "".join(self.line(s) + "\n" for s in seqs).encode()
        if self._conn is not None:
            self._conn.sendall(data)
        else:
            # Written aside, then renamed in: the file appears whole (its arrival).
            self._files += 1
            tmp = self._staging / f"part-{self._files:06d}.jsonl"
            tmp.write_bytes(data)
            os.replace(tmp, self.watch / tmp.name)
        clock.arrive(seqs, time.time())

    def close(self) -> None:
        for s in (self._conn, self._server):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C for the stream (it stops its JVM), then the whole group if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def measure_stream(work: Path, load: StreamWorkload, *, mode: str = "watch",
                   phases: Sequence[tuple[float, float]] = ((1000.0, 10.0),),
                   trigger: float = 1.0, sends_per_second: float = 2.0,
                   warmup_events: int = 100, master: str = "local[2]",
                   start_timeout: float = 300.0, drain_timeout: float = 120.0,
                   extra_args: Sequence[str] = ()) -> list[PhaseResult]:
    """Run the stream over ``mode`` and feed each phase ``(rate events/s, seconds)``;
    one result per phase. The stream's output goes to ``work/stream.log``."""
    if mode not in ("watch", "socket"):
        raise ConfigError(f"mode is watch or socket, not {mode!r}", field="mode")
    work.mkdir(parents=True, exist_ok=True)
    (work / "schema.toml").write_text(load.schema_text)
    (work / "profiles.txt").write_text(load.profiles_text)
    schema = load_schema(work / "schema.toml")
    clock = DeliveryClock()
    feeder = _Feeder(mode, work, load.event_line)
    results: list[PhaseResult] = []
    with _subscriber(schema, load.subscriber_profiles, clock) as net, \
            open(work / "stream.log", "wb") as log:
        cmd = [sys.executable, "-m", "siftbus", "pipeline", "stream", "--schema",
               str(work / "schema.toml"), "--profiles", str(work / "profiles.txt"),
               *feeder.args(), "--out", str(work / "out"), "--master", master,
               "--trigger", f"{trigger:g}", "--deliver-broker",
               f"127.0.0.1:{net.brokers['B0']}", *extra_args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            feeder.connect(start_timeout)
            seq = 0
            warm = range(seq, seq + warmup_events)
            feeder.send(warm, clock)
            seq = warm.stop
            if not clock.wait(warm, start_timeout):
                raise EnvironmentProblem(
                    f"the stream delivered no warm-up events in {start_timeout:.0f} s; see "
                    f"{work / 'stream.log'}")
            for rate, seconds in phases:
                sends = max(1, round(seconds * sends_per_second))
                per = max(1, round(rate / sends_per_second))
                first = seq
                t0 = time.monotonic()
                for k in range(sends):
                    delay = t0 + k / sends_per_second - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    feeder.send(range(seq, seq + per), clock)
                    seq += per
                phase = range(first, seq)
                clock.wait(phase, drain_timeout)
                results.append(clock.result(mode, rate, phase))
                if proc.poll() is not None:
                    break
        finally:
            feeder.close()
            _stop(proc)
    return results


__all__ = [
    "DeliveryClock",
    "PhaseResult",
    "StreamWorkload",
    "measure_stream",
    "percentile",
]
