"""Gateway benchmark: events published through REST batches and delivered over a
WebSocket, against the native msgpack client in the same run, on the same broker.

Setup (real processes, loopback): one ``siftbus broker`` process and one ``siftbus
gateway`` process in front of it; the driver (this process) publishes and subscribes.
Every event matches the one subscription, so each published event is one notification.

* **throughput**: ``--events`` events; gateway path: ``POST /api/publish`` with JSON-lines
  batches of ``--batch`` events (each POST waits for the broker's ack; sent over
  hand-written keep-alive HTTP/1.1, as lean as a client in C or Go, or with
  ``--http httpx``, whose own CPU per request exceeds the gateway's), notifications read
  from one WebSocket; native path: ``Client.publish_batch`` of the same batches (acked),
  notifications to a ``batch_callback`` of a native subscriber. The time runs from the
  first publish to the last notification received, so parsing, HTTP, JSON and WebSocket
  framing are all inside it. CPU seconds: driver + broker + gateway processes (each
  shown; the gateway's is 0 on the native path). The gateway path's driver reads the
  ``notifications`` array messages with orjson, as a fast client in any language would.
  A warm-up run of each path comes first and is not kept.
* **latency at 1,000 ev/s**: events paced at 1,000 per second (10 every 10 ms) for
  ``--seconds``; latency = the driver's receive time minus its send time of that event
  (same clock); p50/p99 over all events; both paths publish the same way as above.

Every run checks that each path delivered exactly the events published.

    python bench/gateway.py --quick     # about a minute
    python bench/gateway.py             # 3 repeats, larger runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import psutil
import websockets

from siftbus.client import Client, NotificationBatch

HERE = Path(__file__).resolve().parent
SCHEMA = '[Tick]\nn = "int[0,1000000000]"\nk = "int[0,9]"\n'


def _config(d: Path, port: int) -> Path:
    (d / "schema.toml").write_text(SCHEMA)
    cfg = d / "net.toml"
    cfg.write_text(f'[network]\nschema = "schema.toml"\n[brokers.B1]\nhost = "127.0.0.1"\n'
                   f"port = {port}\n")
    return cfg


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Servers:
    """A broker process and a gateway process (with a large queue: the benchmark measures
    speed, not drops)."""

    def __init__(self, d: Path) -> None:
        self.port = _free_port()
        self.cfg = _config(d, self.port)
        self.procs: list[subprocess.Popen[str]] = []
        self.url = ""

    def __enter__(self) -> Servers:
        py = [sys.executable, "-m", "siftbus"]
        broker = subprocess.Popen([*py, "broker", "-c", str(self.cfg), "-n", "B1"],
                                  stdout=subprocess.PIPE, text=True)
        self.procs.append(broker)
        assert broker.stdout is not None
        broker.stdout.readline()  # "broker B1 ... listening on ..."
        gw = subprocess.Popen([*py, "gateway", "-c", str(self.cfg), "-n", "B1", "--port", "0",
                               "--queue-size", "1000000", "--max-batch", "100000",
                               "--max-body", str(256 * 1024 * 1024)],
                              stdout=subprocess.PIPE, text=True)
        self.procs.append(gw)
        assert gw.stdout is not None
        line = gw.stdout.readline()
        self.url = line.split(" at ", 1)[1].split(" ", 1)[0]
        return self

    def cpu(self) -> list[float]:
        """CPU seconds so far of the broker and the gateway process."""
        out = []
        for p in self.procs:
            t = psutil.Process(p.pid).cpu_times()
            out.append(t.user + t.system)
        return out

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def events(start: int, n: int) -> list[dict[str, int]]:
    return [{"type": "Tick", "n": i, "k": i % 10} for i in range(start, start + n)]


async def gateway_run(url: str, evs: list[dict[str, int]], batch: int, pace: float | None,
                      client: str = "raw") -> tuple[float, dict[int, float], dict[int, float]]:
    """Publish over REST, receive over one WebSocket: (seconds, sent at, received at)."""
    sent: dict[int, float] = {}
    got: dict[int, float] = {}
    ws = await websockets.connect(url.replace("http://", "ws://") + "/api/ws",
                                  max_size=None, compression=None)
    await ws.send(json.dumps({"op": "subscribe", "id": "all", "profile": "Tick()"}))
    assert json.loads(await ws.recv())["type"] == "subscribed"
    done = asyncio.Event()

    async def read() -> None:
        async for raw in ws:
            msg = orjson.loads(raw)
            kind = msg.get("type")
            if kind in ("notifications", "notification"):  # several per message, or
                now = time.perf_counter()                # one (a gateway before them)
                for note in msg["notifications"] if kind == "notifications" else [msg]:
                    got[note["event"]["n"]] = now
                if len(got) == len(evs):
                    done.set()

    reader = asyncio.ensure_future(read())
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    raw = RawPoster(url) if client == "raw" else None
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def post(part: list[dict[str, int]]) -> None:
            body = b"\n".join(orjson.dumps(e) for e in part)
            if raw is not None:
                status, answer = await raw.post(body)
            else:
                r = await http.post("/api/publish", content=body,
                                    headers={"content-type": "application/x-ndjson"})
                status, answer = r.status_code, r.json()
            assert status == 200 and answer["published"] == len(part), answer

        posts = []
        t0 = time.perf_counter()
        for i in range(0, len(evs), batch):
            part = evs[i:i + batch]
            if pace is not None:  # paced: requests overlap, so the offered rate holds
                await asyncio.sleep(max(0.0, t0 + i * pace - time.perf_counter()))
            now = time.perf_counter()
            for e in part:
                sent[e["n"]] = now
            if pace is None:
                await post(part)
            else:
                posts.append(asyncio.ensure_future(post(part)))
        await asyncio.gather(*posts)
        await asyncio.wait_for(done.wait(), 300)
        elapsed = time.perf_counter() - t0
    reader.cancel()
    await ws.close()
    if raw is not None:
        raw.close()
    return elapsed, sent, got


class RawPoster:
    """``POST /api/publish`` over keep-alive HTTP/1.1 connections written by hand, one
    per request in flight: a client as lean as one in C or Go would be (httpx costs
    about 1.4 ms of CPU per request on the benchmark machine, more than the gateway)."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def post(self, body: bytes) -> tuple[int, Any]:
        while self.idle:  # uvicorn closes a connection idle for 5 s: never reuse those
            reader, writer, used = self.idle.pop()
            if time.monotonic() - used < 3.0:
                break
            writer.close()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.write(b"POST /api/publish HTTP/1.1\r\nhost: gateway\r\n"
                     b"content-type: application/x-ndjson\r\ncontent-length: %d\r\n\r\n"
                     % len(body) + body)
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        assert length is not None, head
        answer = orjson.loads(await reader.readexactly(int(length[1])))
        self.idle.append((reader, writer, time.monotonic()))
        return int(head.split(b" ", 2)[1]), answer

    def close(self) -> None:
        for _, writer, _ in self.idle:
            writer.close()


async def native_run(port: int, evs: list[dict[str, int]], batch: int, pace: float | None
                     ) -> tuple[float, dict[int, float], dict[int, float]]:
    sent: dict[int, float] = {}
    got: dict[int, float] = {}
    done = asyncio.Event()
    sub = await Client.connect("127.0.0.1", port, queue_size=10_000_000)
    pub = await Client.connect("127.0.0.1", port)

    def on_batch(b: NotificationBatch) -> None:
        now = time.perf_counter()
        for nb in b.blocks:
            for n in nb.keys[:, 0].tolist():
                got[n] = now
        if len(got) == len(evs):
            done.set()

    await sub.subscribe("Tick()", batch_callback=on_batch)
    t0 = time.perf_counter()
    for i in range(0, len(evs), batch):
        part = evs[i:i + batch]
        if pace is not None:
            await asyncio.sleep(max(0.0, t0 + i * pace - time.perf_counter()))
        now = time.perf_counter()
        for e in part:
            sent[e["n"]] = now
        await pub.publish_batch(part, ack=True)
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - t0
    await pub.close()
    await sub.close()
    return elapsed, sent, got


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(servers: Servers, path: str, evs: list[dict[str, int]], batch: int,
            pace: float | None, client: str = "raw") -> dict[str, Any]:
    driver0, (broker0, gw0) = time.process_time(), servers.cpu()
    if path == "gateway":
        elapsed, sent, got = asyncio.run(gateway_run(servers.url, evs, batch, pace, client))
    else:
        elapsed, sent, got = asyncio.run(native_run(servers.port, evs, batch, pace))
    driver, (broker, gw) = time.process_time() - driver0, servers.cpu()
    assert sorted(got) == sorted(sent), f"{path}: delivered {len(got)} of {len(sent)}"
    lat = [(got[n] - sent[n]) * 1000 for n in sent]
    cpu = driver + broker - broker0 + gw - gw0
    return {"events": len(evs), "seconds": elapsed, "events_per_s": len(evs) / elapsed,
            "cpu_s": cpu, "cpu_us_per_event": cpu / len(evs) * 1e6,
            "cpu_driver_s": driver, "cpu_broker_s": broker - broker0,
            "cpu_gateway_s": gw - gw0, "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--http", choices=("raw", "httpx"), default="raw",
                    help="the gateway path's HTTP client (default: hand-written keep-alive)")
    args = ap.parse_args()
    n = args.events or (20_000 if args.quick else 100_000)
    seconds = args.seconds or (5.0 if args.quick else 15.0)
    repeats = args.repeats or (2 if args.quick else 3)
    rate_events = int(1000 * seconds)
    load = [os.getloadavg()]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in (
        "gateway_throughput", "native_throughput", "gateway_1000", "native_1000")}
    with tempfile.TemporaryDirectory() as tmp, Servers(Path(tmp)) as servers:
        start = 0
        for path in ("native", "gateway"):  # warm-up (the broker's JIT, imports): not kept
            measure(servers, path, events(start, 2000), args.batch, None, args.http)
            start += 2000
        for _ in range(repeats):
            for path in ("native", "gateway"):  # alternate, so load drift hits both
                runs[f"{path}_throughput"].append(
                    measure(servers, path, events(start, n), args.batch, None, args.http))
                start += n
                runs[f"{path}_1000"].append(
                    measure(servers, path, events(start, rate_events), 10, 0.001, args.http))
                start += rate_events
            load.append(os.getloadavg())
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    gt, nt = med["gateway_throughput"], med["native_throughput"]
    g1, n1 = med["gateway_1000"], med["native_1000"]
    print(f"\n## Gateway (REST batches of {args.batch} in, WebSocket out) vs native client, "
          f"median of {repeats}\n")
    print("| run | events | events/s | vs native | CPU s (driver + broker + gateway) | "
          "CPU us/event | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r, base in (("throughput, gateway", gt, nt), ("throughput, native", nt, nt),
                          ("1,000 ev/s, gateway", g1, n1), ("1,000 ev/s, native", n1, n1)):
        print(f"| {name} | {r['events']:,.0f} | {r['events_per_s']:,.0f} | "
              f"{r['events_per_s'] / base['events_per_s']:.2f}x | {r['cpu_s']:.2f} "
              f"({r['cpu_driver_s']:.2f} + {r['cpu_broker_s']:.2f} + "
              f"{r['cpu_gateway_s']:.2f}) | {r['cpu_us_per_event']:.0f} | "
              f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")
    print(f"\nloadavg: {', '.join(f'{x[0]:.2f}' for x in load)}")
    out = {"machine": platform.platform(), "cpus": os.cpu_count(), "loadavg": load,
           "batch": args.batch, "repeats": repeats, "median": med, "runs": runs,
           "quick": args.quick, "http": args.http}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "gateway.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
