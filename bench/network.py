"""Broker-network benchmark: Bittner's experiments E1-E6 in the simulator, and real broker
processes on loopback (events/s, latency) against mosquitto with client-side filtering.

Part A (simulator, the same broker code as the server): Bittner's workload (report §3.6):
one int attribute per type (domain 0..99,999), equality profiles, ``σ`` identical copies
of each subscribed value within a broker, one subscriber and one publisher per broker,
events matching a subscribed value with probability ``p_e`` (from the publisher's own
broker's values with probability ``locality``). For each protocol (EW flooding, PW
profile forwarding with covering, RK rendezvous with covering) it reports

* ``f_sat``: events / the busiest broker's CPU time handling messages (Bittner's
  saturation throughput: brokers run in parallel, the slowest one bounds the system),
  median of ``--repeats`` publications of the same events; ratio against EW in the run;
* bytes and messages between brokers per event; filter operations per event;
* profile duplication: table entries over all brokers / subscribed profiles;
* E6: table entries and estimated memory of the fullest broker.

Every run checks the delivered notification count against the workload's exact
expectation, so a protocol that gets faster by losing events fails the benchmark.

Part B (loopback, real processes): one ``siftbus broker`` process with 10,000 profiles
(``bench/workload.py`` standard profiles), a subscriber process and a publisher; events/s
from publisher to subscriber with batched publishing, publish-to-notify latency at a
paced 5,000 events/s, the same broker with the reference engine as an in-run baseline,
the same with a subscriber taking one callback per notification instead of one per frame
(``batch_callback``), the same workload through three broker processes in a line
(publisher at B0, subscriber at B2, profile forwarding with covering), and mosquitto
(if installed: ``apt-get install mosquitto``) carrying the same event stream to a
subscriber that filters with the same profiles client-side (minimal MQTT 3.1.1 over
asyncio, QoS 0).

Part C (loopback, real processes): the same single broker with TLS on its port, token
authentication and content-based rights (the publisher's events checked against a
publish right, each of the subscriber's 10,000 profiles against a subscribe right by
covering) against the plain broker, same run, same profiles and events, runs
alternating: throughput ratio (target >= 0.7) and p99 latency at a paced 5,000 events/s
(target <= 2x), medians of at least 3 runs each, with the load average.

    python bench/network.py --quick     # < 4 minutes
    python bench/network.py             # larger workloads, 3 repeats
    python bench/network.py --full
    python bench/network.py --security-only --quick   # part C alone
    python bench/network.py --security-p99 --repeats 3  # part C's p99 at 5,000 ev/s only

The machine is shared (2 cores, other engineers' jobs): wall-clock figures are noisy;
simulator f_sat uses CPU time (``time.process_time``), which is steadier.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from siftbus.broker.node import BrokerNode  # noqa: E402
from siftbus.broker.simulator import Simulator  # noqa: E402
from siftbus.model import Event, IntervalSet, Profile, Schema, parse_schema  # noqa: E402
from siftbus.wire.events import Envelope  # noqa: E402
from siftbus.wire.frames import Message, MsgType  # noqa: E402

DOMAIN = 100_000
UNSUBSCRIBED_FROM = 90_000  # values >= this are never subscribed
PROTOCOLS = {"EW": ("flooding", "simple"), "PW": ("forwarding", "covering"),
             "RK": ("rendezvous", "covering")}


# ---------------------------------------------------------------------------------------
# Part A: simulator


def bittner_schema(types: int) -> Schema:
    return parse_schema("".join(f'[T{t}]\nv = "int[0,{DOMAIN - 1}]"\n' for t in range(types)))


def line(n: int) -> list[tuple[str, str]]:
    return [(f"B{i}", f"B{i + 1}") for i in range(n - 1)]


def hub(n: int) -> list[tuple[str, str]]:
    """Bittner's Fig. 6.5 is only an image; a tree whose inner broker B1 (his V2) is a hub."""
    if n <= 1:
        return []
    return [("B0", "B1")] + [("B1", f"B{i}") for i in range(2, n)]


class TimedSim(Simulator):
    """The simulator, timing each broker's handling of messages (CPU seconds)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.busy: dict[str, float] = defaultdict(float)
        super().__init__(*args, **kw)

    def _deliver(self, src: str, dst: str, msg: Message) -> None:
        t = time.process_time()
        super()._deliver(src, dst, msg)
        self.busy[dst] += time.process_time() - t


@dataclass
class SimWorkload:
    """A simulated network with Bittner's profiles subscribed (not yet run): each broker
    has a subscriber ``s<B>`` and a publisher ``p<B>``; ``values`` are each broker's
    subscribed (type, value) pairs."""

    sim: TimedSim
    schema: Schema
    names: list[str]
    values: dict[str, list[tuple[int, int]]]
    subscribed: int
    rnd: random.Random


def subscribe_workload(*, brokers: int, edges: list[tuple[str, str]], protocol: str,
                       ppb: int, sigma: int = 1, types: int = 1,
                       rn: dict[str, str] | None = None, seed: int = 7) -> SimWorkload:
    rnd = random.Random(seed)
    schema = bittner_schema(types)
    names = [f"B{i}" for i in range(brokers)]
    proto, strategy = PROTOCOLS[protocol]
    sim = TimedSim(schema, names, edges, protocol=proto, strategy=strategy,
                   rendezvous=rn or {t: names[min(1, brokers - 1)] for t in schema.names},
                   roundtrip=True, seed=seed)
    distinct = max(1, ppb // sigma)
    pool = rnd.sample(range(UNSUBSCRIBED_FROM), distinct * brokers)
    values: dict[str, list[tuple[int, int]]] = {}
    subscribed = 0
    for bi, b in enumerate(names):
        sim.add_client(f"s{b}", b)
        sim.add_client(f"p{b}", b)
        mine = [(rnd.randrange(types), v) for v in pool[bi * distinct:(bi + 1) * distinct]]
        values[b] = mine
        profiles = [Profile.from_constraints(f"v{v}-{k}", schema[f"T{t}"],
                                             {"v": IntervalSet.points([v])})
                    for t, v in mine for k in range(sigma)]
        subscribed += len(profiles)
        for i in range(0, len(profiles), 1000):
            sim.subscribe(f"s{b}", profiles[i:i + 1000])
    return SimWorkload(sim, schema, names, values, subscribed, rnd)


def publish_workload(w: SimWorkload, *, events: int, pe: float, locality: float | None,
                     types: int = 1, sigma: int = 1
                     ) -> tuple[dict[str, list[Event]], int, int]:
    """Each publisher's events (matching a subscribed value with probability ``pe``), the
    notifications they must give, and the events per publisher; then a warm-up
    (kernels and table snapshots compiled, not measured)."""
    rnd, names, values = w.rnd, w.names, w.values
    every = [tv for b in names for tv in values[b]]
    evs: dict[str, list[Event]] = {}
    expected = 0
    per = max(1, events // len(names))
    for b in names:
        others = [tv for o in names if o != b for tv in values[o]] or values[b]
        out = []
        for _ in range(per):
            if rnd.random() < pe:
                src = (values[b] if locality is not None and rnd.random() < locality
                       else others if locality is not None else every)
                t, v = rnd.choice(src)
                expected += sigma
            else:
                t, v = rnd.randrange(types), rnd.randrange(UNSUBSCRIBED_FROM, DOMAIN)
            out.append(Event(w.schema[f"T{t}"], (v,)))
        evs[b] = out
    for b in names:
        w.sim.publish(f"p{b}", evs[b][:50])
    w.sim.run()
    for node in w.sim.nodes.values():
        node.routing.batch_match.prepare()
    return evs, expected, per


def run_sim(*, brokers: int, edges: list[tuple[str, str]], protocol: str, ppb: int,
            sigma: int = 1, pe: float = 0.1, locality: float | None = None, types: int = 1,
            events: int = 2000, repeats: int = 1, rn: dict[str, str] | None = None,
            seed: int = 7, events_phase: bool = True) -> dict[str, Any]:
    w = subscribe_workload(brokers=brokers, edges=edges, protocol=protocol, ppb=ppb,
                           sigma=sigma, types=types, rn=rn, seed=seed)
    sim, names, subscribed = w.sim, w.names, w.subscribed
    t0 = time.process_time()
    sim.run()
    sub_cpu = time.process_time() - t0
    tables = sim.table_sizes()
    row: dict[str, Any] = {
        "protocol": protocol, "brokers": brokers, "profiles": subscribed, "sigma": sigma,
        "pe": pe, "locality": locality, "types": types,
        "duplication": sum(tables.values()) / subscribed,
        "max_table": max(tables.values()), "subscribe_cpu_s": round(sub_cpu, 3),
    }
    if not events_phase:
        return row
    evs, expected, per = publish_workload(w, events=events, pe=pe, locality=locality,
                                          types=types, sigma=sigma)
    n_events = per * brokers
    fsats = []
    gc.collect()
    gc.disable()
    before = sim.stats()
    for _ in range(repeats):
        sim.clear_deliveries()
        sim.busy.clear()
        sim.steps = 0
        for b in names:
            for i in range(0, per, 500):
                sim.publish(f"p{b}", evs[b][i:i + 500])
        sim.run()
        got = len(sim.deliveries())
        if got != expected:
            raise AssertionError(f"{protocol}: delivered {got} notifications, expected "
                                 f"{expected}")
        busiest = max(sim.busy[b] for b in names)
        fsats.append(n_events / busiest if busiest > 0 else float("inf"))
    after = sim.stats()
    gc.enable()
    d = {k: sum(getattr(after[b], k) - getattr(before[b], k) for b in names) / repeats
         for k in ("bytes_in", "messages_in", "filter_ops", "notifications")}
    row.update({
        "events": n_events, "fsat": statistics.median(fsats), "fsat_runs": fsats,
        "bytes_per_event": d["bytes_in"] / n_events,
        "messages_per_event": d["messages_in"] / n_events,
        "filter_ops_per_event": d["filter_ops"] / n_events,
        "notifications_per_event": d["notifications"] / n_events,
    })
    return row


def bytes_per_entry() -> float:
    """Memory of one broker's table entry (equality profile), by tracemalloc."""
    schema = bittner_schema(1)
    node = BrokerNode("M", schema)
    node.transport_send = lambda link, msg: None
    node.client_up("c")
    profiles = [Profile.from_constraints(f"v{v}", schema["T0"], {"v": IntervalSet.points([v])})
                for v in range(5000)]
    tracemalloc.start()
    a = tracemalloc.get_traced_memory()[0]
    for p in profiles:
        node.client_profiles.subscribe_all("c", [p])
    b = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (b - a) / len(profiles)


def part_a(size: str, repeats: int) -> dict[str, list[dict[str, Any]]]:
    ppb = {"quick": 500, "default": 2000, "full": 10000}[size]
    # batches of 500 cost microseconds per event now: enough events that the busiest
    # broker's CPU time is tens of milliseconds, not a few timer ticks
    events = {"quick": 20000, "default": 50000, "full": 200000}[size]
    res: dict[str, list[dict[str, Any]]] = {}
    pes = [0.0, 0.1, 0.5, 1.0] if size != "quick" else [0.0, 0.5, 1.0]
    res["E1"] = [dict(run_sim(brokers=4, edges=line(4), protocol=p, ppb=ppb, pe=pe,
                              events=events, repeats=repeats), experiment="E1")
                 for pe in pes for p in PROTOCOLS]
    counts = [1, 3, 5, 9] if size == "quick" else [1, 3, 5, 7, 9]
    res["E2"] = [dict(run_sim(brokers=n, edges=hub(n), protocol=p, ppb=4 * ppb // n,
                              pe=0.1, events=events, repeats=repeats), experiment="E2")
                 for n in counts for p in PROTOCOLS]
    res["E3"] = [dict(run_sim(brokers=5, edges=hub(5), protocol=p, ppb=ppb, sigma=s,
                              pe=min(1.0, 0.9 / s), events=events, repeats=repeats),
                      experiment="E3") for s in (1, 3, 9) for p in PROTOCOLS]
    res["E4"] = [dict(run_sim(brokers=5, edges=hub(5), protocol=p, ppb=ppb, types=t,
                              pe=0.1, events=events, repeats=repeats,
                              rn={f"T{i}": f"B{i}" for i in range(t)}), experiment="E4")
                 for t in (1, 2, 4) for p in PROTOCOLS]
    res["E5"] = [dict(run_sim(brokers=4, edges=line(4), protocol=p, ppb=ppb, pe=0.5,
                              locality=loc, events=events, repeats=repeats), experiment="E5")
                 for loc in (0.0, 0.5, 1.0) for p in PROTOCOLS]
    per_entry = bytes_per_entry()
    sizes = {"quick": [250, 1000, 4000], "default": [500, 2000, 8000],
             "full": [2000, 10000, 40000]}[size]
    e6 = []
    for n in sizes:
        for p in PROTOCOLS:
            r = run_sim(brokers=4, edges=line(4), protocol=p, ppb=n, events_phase=False)
            r["experiment"] = "E6"
            r["bytes_per_entry"] = per_entry
            r["max_broker_mb"] = r["max_table"] * per_entry / 2**20
            e6.append(r)
    res["E6"] = e6
    return res


# ---------------------------------------------------------------------------------------
# Part B: loopback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- security: the same broker with TLS, tokens and content-based rights ---------------

SECURITY_TOML = """
[security]
ca = "pki/ca.pem"
token_key = "pki/token.key"

[security.principals.bench]          # publisher and probes: a content publish right
publish = ["S0(i0 <= 499)", "S0(i0 >= 500)"]
services = ["broker.*"]

[security.principals.bench-sub]      # subscriber: every profile checked by covering
subscribe = ["S0(i0 <= 499)", "S0(i0 >= 500)"]
"""


def make_security(tmp: Path, brokers: int = 3) -> Path:
    """A CA, broker certificates, a token key and the two principals' tokens in
    ``tmp/pki`` (made once per run)."""
    from siftbus.security.certs import init_ca, issue
    from siftbus.security.tokens import TokenSigner, new_secret

    d = tmp / "pki"
    if (d / "tokens.json").exists():
        return d
    init_ca(d)
    for i in range(brokers):
        issue(d, f"B{i}")
    secret = new_secret()
    (d / "token.key").write_bytes(secret)
    signer = TokenSigner(secret)
    (d / "tokens.json").write_text(json.dumps(
        {"pub": signer.issue("bench", ttl=86400), "sub": signer.issue("bench-sub",
                                                                       ttl=86400)}))
    return d


def creds(secure: Path | None, who: str = "pub") -> dict[str, Any]:
    """``Client.connect`` keywords for a secured broker (token and TLS), or none."""
    if secure is None:
        return {}
    from siftbus.client import client_tls

    tokens = json.loads((secure / "tokens.json").read_text())
    if not secure_tls():
        return {"token": tokens[who]}
    return {"token": tokens[who], "tls": client_tls(secure / "ca.pem")}


def secure_tls() -> bool:
    """Whether the secured runs speak TLS (``BENCH_SECURE_TLS=0``: tokens and rights
    only, to tell the cost of TLS from that of the checks)."""
    return os.environ.get("BENCH_SECURE_TLS", "1") != "0"


def start_brokers(tmp: Path, engine: str, n: int = 1, secure: Path | None = None
                  ) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    """``n`` broker processes B0 - B1 - ... in a line (profile forwarding with covering);
    returns them and their ports once every link is up. With ``secure`` (a
    :func:`make_security` directory) every port and link speaks TLS and clients need
    tokens and rights."""
    from workload import standard_schema

    ports = [free_port() for _ in range(n)]
    (tmp / "schema.toml").write_text(standard_schema().to_toml())
    cfg = tmp / f"net-{engine}-{n}{'-secure' if secure else ''}.toml"
    text = (f'[network]\nschema = "schema.toml"\nengine = "{engine}"\n'
            'protocol = "forwarding"\nstrategy = "covering"\n')
    for i, port in enumerate(ports):
        text += f"[brokers.B{i}]\nport = {port}\n"
        if i:
            text += f'neighbours = ["B{i - 1}"]\n'
        if secure is not None and secure_tls():
            text += f'cert = "pki/B{i}.pem"\nkey = "pki/B{i}.key"\n'
    if secure is not None:
        text += SECURITY_TOML if secure_tls() else SECURITY_TOML.replace(
            'ca = "pki/ca.pem"\n', "")
    cfg.write_text(text)
    procs = []
    for i in range(n):
        p = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "-c", str(cfg),
                              "-n", f"B{i}"], stdout=subprocess.PIPE)
        assert p.stdout is not None
        p.stdout.readline()
        procs.append(p)
    if n > 1:
        asyncio.run(wait_tables(ports, links=True, secure=secure))
    return procs, ports


async def quiet(ports: list[int], timeout: float = 60, secure: Path | None = None) -> None:
    """Until no broker's event count moves for 0.3 s: the warm-up has passed the whole
    line (the ACK of the first broker says nothing about the others), so the later
    brokers' kernel and snapshot compilation stays out of the measurement."""
    from siftbus.client import Client

    cs = [await Client.connect(port=p, name=f"bench-quiet-{i}", **creds(secure))
          for i, p in enumerate(ports)]
    try:
        prev: list[Any] = []
        stable = 0
        deadline = time.time() + timeout
        while time.time() < deadline and stable < 3:
            counts = [(await c.stats())["events_in"] for c in cs]
            stable = stable + 1 if counts == prev else 0
            prev = counts
            await asyncio.sleep(0.1)
    finally:
        for c in cs:
            await c.close()


async def wait_tables(ports: list[int], links: bool = False, timeout: float = 60,
                      secure: Path | None = None) -> None:
    """Until every broker has its links up (``links``) or its profile table has stopped
    changing (the subscriber's profiles have reached every broker)."""
    from siftbus.client import Client

    cs = [await Client.connect(port=p, name=f"bench-probe-{i}", **creds(secure))
          for i, p in enumerate(ports)]
    try:
        deadline = time.time() + timeout
        prev: list[Any] = []
        stable = 0
        while time.time() < deadline:
            stats = [await c.stats() for c in cs]
            if links:
                if all(s["neighbours_up"] == (1 if i in (0, len(cs) - 1) else 2)
                       for i, s in enumerate(stats)):
                    return
            else:
                sizes = [s["table_size"] for s in stats]
                stable = stable + 1 if sizes == prev and all(sizes) else 0
                if stable >= 3:
                    return
                prev = sizes
            await asyncio.sleep(0.2)
        raise AssertionError(f"broker line not ready after {timeout} s")
    finally:
        for c in cs:
            await c.close()


def sub_process(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role",
                             *args], stdout=subprocess.PIPE, text=True)


def workload(n_profiles: int, n_events: int) -> tuple[list[Profile], list[Event]]:
    from workload import standard_events, standard_profiles

    return (standard_profiles(n_profiles, target_matches=1.0),
            standard_events(n_events, seed=5))


def count_matching(profiles: list[Profile], events: list[Event]) -> tuple[int, int]:
    from siftbus.match.engines import make_matcher

    m = make_matcher("index")
    for p in profiles:
        m.add(p)
    res = m.match_batch(events)
    return sum(len(r) for r in res), sum(1 for r in res if r)


async def role_subscriber(port: int, n_profiles: int, expect: int, timeout: float,
                          consumer: str = "batch", secure: Path | None = None) -> None:
    """Subscribe the standard profiles, count notifications, report times and latencies.

    ``consumer``: ``batch`` takes one :class:`NotificationBatch` per NOTIFY frame (no
    object per notification); ``each`` one callback per notification.
    """
    from siftbus.client import Client, NotificationBatch

    profiles, _ = workload(n_profiles, 0)
    c = await Client.connect(port=port, name="bench-sub", queue_size=10,
                             **creds(secure, "sub"))
    got = 0
    lat: list[float] = []
    stamps: list[Any] = []
    first = last = 0.0
    done = asyncio.Event()

    def on_batch(b: NotificationBatch) -> None:
        nonlocal got, first, last
        now = time.time()
        for nb in b.blocks:
            if isinstance(nb.src, str) and nb.src.endswith("/bench-warm"):
                continue  # warm-up traffic (kernel compilation) is not measured
            if not isinstance(nb.src, str):  # several publishers in one block
                live = [not s.endswith("/bench-warm") for s in nb.src]
                ts = nb.ts[live]
                k = nb.counts[live]
            else:
                ts, k = nb.ts, nb.counts
            n = int(k.sum())
            if not n:
                continue
            if not got:
                first = now
            got += n
            last = now
            stamps.append(now - ts.repeat(k))
        if got >= expect:
            done.set()

    def on(n: Any) -> None:
        nonlocal got, first, last
        if n.src.endswith("/bench-warm"):
            return  # warm-up traffic (kernel compilation) is not measured
        now = time.time()
        if not got:
            first = now
        got += 1
        last = now
        lat.append(now - n.ts)
        if got >= expect:
            done.set()

    for i in range(0, len(profiles), 2000):
        if consumer == "batch":
            await c.subscribe_many(profiles[i:i + 2000], batch_callback=on_batch)
        else:
            await c.subscribe_many(profiles[i:i + 2000], on)
    print("ready", flush=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
    if stamps:
        import numpy as np

        lat = np.concatenate(stamps).tolist()
    lat.sort()
    q = (lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000) if lat else \
        (lambda f: float("nan"))
    print(json.dumps({"got": got, "first": first, "last": last, "p50_ms": q(0.5),
                      "p99_ms": q(0.99), "max_ms": q(1.0),
                      "cpu_s": time.process_time()}), flush=True)
    await c.close()


WARM_EVENTS = 6000
"""Warm-up events before each loopback run (not measured): the broker compiles its
kernels, and after a table change it matches level by level until the events at the new
version pay for compiling a snapshot (half the table size, 5,000 here)."""


async def publish_events(ports: list[int], events: list[Event], rate: float | None,
                         batch: int, warm_events: int, broker_pids: list[int],
                         secure: Path | None = None) -> tuple[float, list[float | None]]:
    """Warm up, then publish to the first broker; returns the start time and the brokers'
    CPU seconds then."""
    from siftbus.client import Client

    port = ports[0]
    warm = await Client.connect(port=port, name="bench-warm", **creds(secure))
    for i in range(0, warm_events, 1000):
        await warm.publish_batch(events[i % len(events):][:min(1000, warm_events - i)],
                                 ack=True)
    await warm.close()
    if len(ports) > 1:
        await quiet(ports, secure=secure)
    c = await Client.connect(port=port, name="bench-pub", **creds(secure))
    cpu0 = [process_cpu(pid) for pid in broker_pids]
    t0 = time.time()
    if rate is None:
        for i in range(0, len(events), batch):
            await c.publish_batch(events[i:i + batch], ack=(i // batch) % 4 == 3)
    else:
        # paced at the offered rate in small batches (a few ms of events each), so the
        # latency measured is the broker's, not a backlog queued in the publisher
        step = batch / rate
        for k, i in enumerate(range(0, len(events), batch)):
            await c.publish_batch(events[i:i + batch])
            delay = t0 + (k + 1) * step - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
    await c.ping()
    await c.close()
    return t0, cpu0


def loopback_run(tmp: Path, engine: str, n_profiles: int, events: list[Event],
                 profiles: list[Profile], rate: float | None = None,
                 batch: int = 1000, brokers: int = 1, consumer: str = "batch",
                 secure: Path | None = None) -> dict[str, Any]:
    """One run: ``brokers`` in a line, the publisher at the first, the subscriber (with
    ``consumer``) at the last. The broker CPU rate is that of the busiest broker."""
    notifs, _ = count_matching(profiles, events)
    procs, ports = start_brokers(tmp, engine, brokers, secure)
    try:
        sub = sub_process(["subscriber", "--port", str(ports[-1]), "--profiles",
                           str(n_profiles), "--expect", str(notifs), "--timeout", "120",
                           "--consumer", consumer]
                          + (["--secure", str(secure)] if secure else []))
        assert sub.stdout is not None
        assert sub.stdout.readline().strip() == "ready"
        if brokers > 1:
            asyncio.run(wait_tables(ports, secure=secure))
        warm = WARM_EVENTS if engine == "index" else 20  # the reference is too slow
        t0, cpu0 = asyncio.run(publish_events(ports, events, rate, batch, warm,
                                              [p.pid for p in procs], secure))
        out = json.loads(sub.stdout.readline())
        cpu1 = [process_cpu(p.pid) for p in procs]
        sub.wait(30)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
    if out["got"] != notifs:
        raise AssertionError(f"subscriber got {out['got']} notifications, expected {notifs}")
    elapsed = out["last"] - t0
    cpus = [b - a for a, b in zip(cpu0, cpu1, strict=True) if a is not None and b is not None]
    broker_cpu = max(cpus) if len(cpus) == len(procs) else None
    return {"engine": engine, "brokers": brokers, "consumer": consumer,
            "security": "TLS+token+rights" if secure else "none",
            "profiles": n_profiles, "events": len(events),
            "notifications": notifs, "rate": rate, "batch": batch,
            "events_per_s": len(events) / elapsed,
            "broker_cpu_s": broker_cpu, "brokers_cpu_s": cpus,
            "broker_events_per_cpu_s": len(events) / broker_cpu if broker_cpu else None,
            "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"], "max_ms": out["max_ms"],
            "subscriber_cpu_s": out.get("cpu_s"), "loadavg": os.getloadavg()}


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux ``/proc``), or ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


# ---- minimal MQTT 3.1.1 (QoS 0) --------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n % 128, n // 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _mqtt_str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def mqtt_connect(client_id: str) -> bytes:
    body = _mqtt_str("MQTT") + bytes([4, 0x02]) + struct.pack(">H", 60) + _mqtt_str(client_id)
    return b"\x10" + _varint(len(body)) + body


def mqtt_subscribe(topic: str) -> bytes:
    body = struct.pack(">H", 1) + _mqtt_str(topic) + b"\x00"
    return b"\x82" + _varint(len(body)) + body


def mqtt_publish(topic: str, payload: bytes) -> bytes:
    body = _mqtt_str(topic) + payload
    return b"\x30" + _varint(len(body)) + body


async def mqtt_read(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = (await reader.readexactly(1))[0]
    n, mult = 0, 1
    while True:
        b = (await reader.readexactly(1))[0]
        n += (b & 0x7F) * mult
        mult *= 128
        if not b & 0x80:
            break
    return head >> 4, await reader.readexactly(n)


async def role_mqtt_subscriber(port: int, n_profiles: int, expect: int,
                               timeout: float) -> None:
    """Receive every event from mosquitto and filter it client-side with the index."""
    import msgpack

    from siftbus.match.engines import make_matcher
    from siftbus.wire.events import decode_envelope
    from workload import standard_schema

    schema = standard_schema()
    profiles, _ = workload(n_profiles, 0)
    m = make_matcher("index")
    for p in profiles:
        m.add(p)
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
    w.write(mqtt_connect("bench-sub") + mqtt_subscribe("siftbus/#"))
    assert (await mqtt_read(r))[0] == 2
    assert (await mqtt_read(r))[0] == 9
    print("ready", flush=True)
    got = notified = 0
    lat: list[float] = []
    last = 0.0
    lost_connection = False
    deadline = time.time() + timeout
    batch: list[Envelope] = []

    def flush() -> None:
        nonlocal notified
        for env, ids in zip(batch, m.match_batch([e.event for e in batch]), strict=True):
            if ids:
                now = time.time()
                notified += len(ids)
                lat.extend([now - env.ts] * len(ids))
        batch.clear()

    try:
        while got < expect and time.time() < deadline:
            kind, body = await asyncio.wait_for(mqtt_read(r), max(0.1, deadline - time.time()))
            if kind != 3:
                continue
            tlen = struct.unpack(">H", body[:2])[0]
            batch.append(decode_envelope(msgpack.unpackb(body[2 + tlen:]), schema))
            got += 1
            if len(batch) >= 256 or r._buffer == b"":  # type: ignore[attr-defined]
                flush()
                last = time.time()
    except TimeoutError:
        pass
    except (asyncio.IncompleteReadError, ConnectionError):
        lost_connection = True  # mosquitto closed us; report what arrived (lost > 0)
    flush()
    last = time.time() if got else last
    lat.sort()
    q = (lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000) if lat else \
        (lambda f: float("nan"))
    print(json.dumps({"got": got, "notified": notified, "last": last, "p50_ms": q(0.5),
                      "p99_ms": q(0.99), "disconnected": lost_connection}), flush=True)
    w.close()


async def mqtt_publish_events(port: int, events: list[Event], rate: float | None,
                              batch: int) -> float:
    import msgpack

    from siftbus.wire.events import encode_envelope

    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(mqtt_connect("bench-pub"))
    assert (await mqtt_read(r))[0] == 2
    t0 = time.time()
    for k, i in enumerate(range(0, len(events), batch)):
        now = time.time()
        w.write(b"".join(
            mqtt_publish(f"siftbus/{e.etype.name}",
                         msgpack.packb(encode_envelope(Envelope(e, "pub", i + j, now))))
            for j, e in enumerate(events[i:i + batch])))
        await w.drain()
        if rate is not None:
            delay = t0 + (k + 1) * batch / rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
    w.write(b"\xe0\x00")
    await w.drain()
    w.close()
    return t0


def mosquitto_run(tmp: Path, n_profiles: int, events: list[Event], profiles: list[Profile],
                  rate: float | None = None, batch: int = 1000) -> dict[str, Any]:
    binary = shutil.which("mosquitto") or ("/usr/sbin/mosquitto"
                                           if os.path.exists("/usr/sbin/mosquitto") else None)
    if binary is None:
        return {"skipped": "mosquitto is not installed (apt-get install -y mosquitto)"}
    notifs, _ = count_matching(profiles, events)
    port = free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    "max_queued_messages 0\nmax_inflight_messages 0\n"
                    f"log_dest file {tmp / 'mosquitto.log'}\n")
    broker = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        sub = sub_process(["mqtt-subscriber", "--port", str(port), "--profiles",
                           str(n_profiles), "--expect", str(len(events)), "--timeout", "120"])
        assert sub.stdout is not None
        assert sub.stdout.readline().strip() == "ready"
        t0 = asyncio.run(mqtt_publish_events(port, events, rate, batch))
        out = json.loads(sub.stdout.readline())
        sub.wait(30)
    finally:
        broker.terminate()
        broker.wait(10)
    lost = len(events) - out["got"]
    if lost:
        log = tmp / "mosquitto.log"
        print(f"mosquitto lost {lost} events; its log ends:\n"
              + "\n".join(log.read_text().splitlines()[-5:] if log.exists() else []))
    return {"engine": "mosquitto+client filter", "profiles": n_profiles,
            "events": len(events), "received": out["got"], "lost": lost,
            "notifications": out["notified"], "expected_notifications": notifs, "rate": rate,
            "events_per_s": out["got"] / (out["last"] - t0),
            "disconnected_by_broker": out["disconnected"],
            "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"], "loadavg": os.getloadavg()}


def client_dispatch_cpu(profiles: list[Profile], events: list[Event],
                        frames: int = 20) -> dict[str, Any]:
    """CPU time of the client library handling one NOTIFY frame (decode and hand-out) of
    the first 1,000 events, with one callback per notification and with one batch
    callback; in-process, without sockets, so it is the client's own cost."""
    import numpy as np

    from siftbus.client.aio import Client, Subscription
    from siftbus.match.engines import make_matcher
    from siftbus.wire.events import Block, encode_block
    from siftbus.wire.frames import decode_payload, encode

    m = make_matcher("index")
    for p in profiles:
        m.add(p)
    evs = events[:1000]
    res = m.match_batch(evs)
    rows = [i for i, r in enumerate(res) if r]
    block = Block.of_events([evs[i] for i in rows], "B0/pub",
                            np.arange(len(rows), dtype=np.int64),
                            np.full(len(rows), time.time()))
    counts = np.array([len(res[i]) for i in rows], np.int32)
    pids = [p for i in rows for p in sorted(res[i])]
    payload = encode(Message(MsgType.NOTIFY, {"blocks": [encode_block(block, counts,
                                                                       pids)]}))[4:]
    out: dict[str, Any] = {"events": len(evs), "notifications": len(pids)}
    for mode in ("each", "batch"):
        c = Client(None)  # never connected
        c.schema = workload_schema()
        seen = [0]

        def each(_: Any, seen: list[int] = seen) -> None:
            seen[0] += 1

        def batch(b: Any, seen: list[int] = seen) -> None:
            seen[0] += len(b)

        for p in profiles:
            c._register(Subscription(c, p, each if mode == "each" else None, 10,
                                     batch if mode == "batch" else None))
        t = time.process_time()
        for _ in range(frames):
            c._dispatch(decode_payload(payload))
        cpu = (time.process_time() - t) / frames
        if seen[0] != frames * len(pids):
            raise AssertionError(f"{mode}: {seen[0]} notifications handed out")
        out[f"{mode}_ms_per_frame"] = cpu * 1000
        out[f"{mode}_ns_per_notification"] = cpu / len(pids) * 1e9
    out["batch_vs_each"] = out["each_ms_per_frame"] / out["batch_ms_per_frame"]
    return out


def workload_schema() -> Schema:
    from workload import standard_schema

    return standard_schema()


def part_b(size: str, repeats: int) -> dict[str, Any]:
    n_profiles = 10_000
    n_events = {"quick": 40_000, "default": 100_000, "full": 300_000}[size]
    profiles, events = workload(n_profiles, n_events)
    out: dict[str, Any] = {"loadavg_start": os.getloadavg()}
    out["client_dispatch"] = client_dispatch_cpu(profiles, events)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs = [loopback_run(tmp, "index", n_profiles, events, profiles)
                for _ in range(repeats)]
        out["throughput"] = runs
        out["throughput_median"] = statistics.median(r["events_per_s"] for r in runs)
        # the subscriber as before the batch API: one callback per notification
        out["per_notification"] = loopback_run(tmp, "index", n_profiles, events, profiles,
                                               consumer="each")
        line3 = [loopback_run(tmp, "index", n_profiles, events, profiles, brokers=3)
                 for _ in range(repeats)]
        out["line3_throughput"] = line3
        out["line3_throughput_median"] = statistics.median(r["events_per_s"] for r in line3)
        few = events[:400]
        out["reference_engine"] = loopback_run(tmp, "reference", n_profiles, few, profiles,
                                               batch=100)
        paced = events[:min(len(events), 25_000 if size == "quick" else 50_000)]
        out["latency_5k"] = loopback_run(tmp, "index", n_profiles, paced, profiles,
                                         rate=5000.0, batch=10)
        out["line3_latency_5k"] = loopback_run(tmp, "index", n_profiles, paced, profiles,
                                               rate=5000.0, batch=10, brokers=3)
        mq = [mosquitto_run(tmp, n_profiles, events, profiles) for _ in range(repeats)]
        out["mosquitto"] = mq
        if "skipped" not in mq[0]:
            complete = [r for r in mq if not r["lost"]] or mq  # a dropped run is no rate
            out["mosquitto_median"] = statistics.median(r["events_per_s"] for r in complete)
            out["mosquitto_latency_5k"] = mosquitto_run(tmp, n_profiles, paced, profiles,
                                                        rate=5000.0, batch=10)
    out["loadavg_end"] = os.getloadavg()
    return out


# ---------------------------------------------------------------------------------------
# report


def table(rows: list[dict[str, Any]], cols: list[str], title: str) -> str:
    out = [f"\n### {title}\n", "| " + " | ".join(cols) + " |",
           "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"{v:,.2f}" if isinstance(v, float) and abs(v) < 100 else
                         f"{v:,.0f}" if isinstance(v, float) else str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def add_ratios(rows: list[dict[str, Any]], key: tuple[str, ...]) -> None:
    base = {tuple(r[k] for k in key): r for r in rows if r["protocol"] == "EW"}
    for r in rows:
        b = base.get(tuple(r[k] for k in key))
        if b and "fsat" in r:
            r["fsat_vs_EW"] = r["fsat"] / b["fsat"]


def plots(res: dict[str, list[dict[str, Any]]], outdir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = {
        "E1": ("pe", "fsat", "p_e (fraction of matching events)", "f_sat (events/s, CPU)"),
        "E2": ("brokers", "fsat", "brokers", "f_sat (events/s, CPU)"),
        "E3": ("sigma", "fsat", "σ (identical copies), p_p constant", "f_sat (events/s, CPU)"),
        "E4": ("types", "fsat", "event types", "f_sat (events/s, CPU)"),
        "E5": ("locality", "fsat", "locality", "f_sat (events/s, CPU)"),
        "E6": ("profiles", "max_broker_mb", "subscribed profiles (4 brokers)",
               "memory of the fullest broker (MB)"),
    }
    written = []
    for exp, (x, y, xl, yl) in specs.items():
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for p in PROTOCOLS:
            rows = [r for r in res[exp] if r["protocol"] == p]
            axes[0].plot([r[x] for r in rows], [r[y] for r in rows], marker="o", label=p)
            second = "duplication" if exp in ("E2", "E3", "E6") else "bytes_per_event"
            axes[1].plot([r[x] for r in rows], [r.get(second, 0) for r in rows], marker="o",
                         label=p)
            axes[1].set_ylabel(second.replace("_", " "))
        for ax in axes:
            ax.set_xlabel(xl)
            ax.legend()
            ax.grid(alpha=0.3)
        axes[0].set_ylabel(yl)
        fig.suptitle(f"{exp} (siftbus simulator, Bittner's workload)")
        fig.tight_layout()
        path = outdir / f"network_{exp.lower()}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(str(path.relative_to(HERE.parent)))
    return written


def report_loopback(lb: dict[str, Any]) -> dict[str, Any]:
    """Print the loopback table (ratios against siftbus's median) and return ``lb``."""
    rows = [*lb["throughput"], lb["per_notification"], lb["reference_engine"],
            lb["latency_5k"], *lb["line3_throughput"], lb["line3_latency_5k"]]
    mq = lb["mosquitto"]
    if "skipped" in mq[0]:
        print(f"\nmosquitto comparison skipped: {mq[0]['skipped']}")
    else:
        rows += [*mq, lb["mosquitto_latency_5k"]]
    base = lb["throughput_median"]
    for r in rows:
        if "events_per_s" in r:
            r["vs_siftbus_index"] = r["events_per_s"] / base
    print(table(rows, ["engine", "brokers", "consumer", "events", "rate", "notifications",
                       "events_per_s", "vs_siftbus_index", "broker_events_per_cpu_s",
                       "p50_ms", "p99_ms"],
                "Loopback: 1 or 3 broker processes (line), 10,000 profiles, batched "
                "publishing"))
    if "mosquitto_median" in lb:
        lb["siftbus_vs_mosquitto"] = base / lb["mosquitto_median"]
        print(f"\nsiftbus / mosquitto+client filter (median events/s): "
              f"{lb['siftbus_vs_mosquitto']:.2f}")
    cd = lb.get("client_dispatch")
    if cd:
        print(f"\nclient CPU per NOTIFY frame ({cd['events']:,} events, "
              f"{cd['notifications']:,} notifications): one callback per notification "
              f"{cd['each_ms_per_frame']:.2f} ms, batch callback "
              f"{cd['batch_ms_per_frame']:.2f} ms ({cd['batch_vs_each']:.1f}x less)")
    print(f"load average: start {lb['loadavg_start']}, end {lb['loadavg_end']}")
    return lb


def security_compare(size: str, repeats: int, p99_only: bool = False) -> dict[str, Any]:
    """One broker with TLS, token authentication and content-based rights against the
    same broker without, in the same run, on the same 10,000 profiles and events:
    throughput (batched publishing) and latency at a paced 5,000 events/s. The runs
    alternate (plain, secure, secure, plain, ...) so drift of the shared machine's load
    hits both; medians of ``repeats`` runs each."""
    n_profiles = 10_000
    n_events = {"quick": 40_000, "default": 100_000, "full": 300_000}[size]
    profiles, events = workload(n_profiles, n_events)
    paced = events[:25_000 if size == "quick" else 50_000]
    out: dict[str, Any] = {"loadavg_start": os.getloadavg(), "profiles": n_profiles,
                           "repeats": repeats, "client_loop": "uvloop",
                           "nice": os.nice(0), "p99_only": p99_only}
    # the clients run on uvloop, as the broker does: asyncio's pure-Python TLS layer in
    # the subscriber would measure the client library's event loop, not the broker
    from siftbus.broker.server import install_uvloop

    os.environ["BENCH_UVLOOP"] = "1"
    install_uvloop()
    try:
        _security_runs(out, n_profiles, profiles, events, paced, repeats, p99_only)
    finally:
        os.environ.pop("BENCH_UVLOOP", None)
        asyncio.set_event_loop_policy(None)
    runs = out["runs"]
    med = {k: statistics.median(x["events_per_s"] for x in v) for k, v in runs.items()}
    p99 = {k: statistics.median(x["p99_ms"] for x in v) for k, v in runs.items()}
    cpu = {k: statistics.median(x["broker_events_per_cpu_s"] or 0.0 for x in v)
           for k, v in runs.items()}
    out["median_events_per_s"] = med
    out["median_p99_ms"] = p99
    out["median_broker_events_per_cpu_s"] = cpu
    out["p99_ratio_5k"] = p99["secure_5k"] / p99["plain_5k"]
    out["p99_ratios_5k"] = [s["p99_ms"] / p["p99_ms"] for s, p in
                            zip(runs["secure_5k"], runs["plain_5k"], strict=True)]
    out["targets"] = {"p99_ratio_5k <= 2": out["p99_ratio_5k"] <= 2.0}
    if not p99_only:
        out["throughput_ratio"] = med["secure"] / med["plain"]
        out["p99_ratio_5k_checks_only"] = p99["checks_5k"] / p99["plain_5k"]
        out["broker_cpu_ratio"] = (cpu["secure"] / cpu["plain"]) if cpu["plain"] else None
        out["targets"]["throughput_ratio >= 0.7"] = out["throughput_ratio"] >= 0.7
    out["loadavg_end"] = os.getloadavg()
    return out


def _security_runs(out: dict[str, Any], n_profiles: int, profiles: list[Profile],
                   events: list[Event], paced: list[Event], repeats: int,
                   p99_only: bool = False) -> None:
    """The alternating plain/secure runs of :func:`security_compare` (into ``out``);
    ``p99_only``: the paced runs at 5,000 events/s alone."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        pki = make_security(tmp)
        keys = ["plain_5k", "secure_5k"] if p99_only else ["plain", "secure", "plain_5k",
                                                            "secure_5k", "checks_5k"]
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
        for r in range(repeats):
            order = [None, pki] if r % 2 == 0 else [pki, None]
            if not p99_only:
                for sec in order:
                    key = "secure" if sec else "plain"
                    runs[key].append(loopback_run(tmp, "index", n_profiles, events,
                                                  profiles, secure=sec))
            for sec in reversed(order):
                key = "secure_5k" if sec else "plain_5k"
                runs[key].append(loopback_run(tmp, "index", n_profiles, paced, profiles,
                                              rate=5000.0, batch=10, secure=sec))
                x = runs[key][-1]
                print(f"  {key}: p50 {x['p50_ms']:.1f} ms, p99 {x['p99_ms']:.1f} ms, "
                      f"{x['events_per_s']:.0f} ev/s, load {x['loadavg'][0]:.1f}", flush=True)
            if p99_only:
                continue
            # tokens and rights without TLS: which part of the cost is TLS's
            os.environ["BENCH_SECURE_TLS"] = "0"
            try:
                runs["checks_5k"].append(loopback_run(tmp, "index", n_profiles, paced,
                                                      profiles, rate=5000.0, batch=10,
                                                      secure=pki))
            finally:
                os.environ.pop("BENCH_SECURE_TLS", None)
    out["runs"] = runs


def report_security(sec: dict[str, Any]) -> dict[str, Any]:
    rows = [{"run": k, "runs": len(v),
             "events_per_s": sec["median_events_per_s"][k],
             "broker_events_per_cpu_s": sec["median_broker_events_per_cpu_s"][k],
             "p50_ms": statistics.median(x["p50_ms"] for x in v),
             "p99_ms": sec["median_p99_ms"][k]} for k, v in sec["runs"].items()]
    print(table(rows, ["run", "runs", "events_per_s", "broker_events_per_cpu_s", "p50_ms",
                       "p99_ms"],
                "Security: one broker, 10,000 profiles, TLS + tokens + content-based "
                "rights against none (medians, same run)"))
    if "throughput_ratio" in sec:
        print(f"\nthroughput secure/plain: {sec['throughput_ratio']:.2f} (target >= 0.7); "
              f"tokens and rights without TLS/plain: {sec['p99_ratio_5k_checks_only']:.2f}")
    print(f"p99 at 5,000 ev/s secure/plain: {sec['p99_ratio_5k']:.2f} (target <= 2; per "
          f"pair {', '.join(f'{x:.2f}' for x in sec['p99_ratios_5k'])}); nice {sec['nice']}")
    print(f"load average: start {sec['loadavg_start']}, end {sec['loadavg_end']}")
    return sec


def security_only(size: str, repeats: int, outdir: Path, started: float,
                  p99_only: bool = False) -> None:
    """The security comparison alone, merged into the last result file (``p99_only``:
    under ``security_p99``, the last full comparison kept)."""
    path = outdir / "network.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    print(f"# siftbus broker security benchmark ({size}, {repeats} repeats, "
          f"{os.cpu_count()} CPUs, shared machine: noisy)")
    sec = report_security(security_compare(size, repeats, p99_only))
    sec["size"] = size
    sec["seconds"] = round(time.time() - started, 1)
    sec["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["security_p99" if p99_only else "security"] = sec
    result.setdefault("python", platform.python_version())
    result.setdefault("cpus", os.cpu_count())
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwrote bench/results/network.json (security part) in {sec['seconds']} s")


def loopback_only(size: str, repeats: int, outdir: Path, started: float) -> None:
    """Part B alone, merged into the last full result file (its simulator part kept)."""
    path = outdir / "network.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    print(f"# siftbus broker network benchmark, loopback only ({size}, {repeats} "
          f"repeat(s), {os.cpu_count()} CPUs, shared machine: noisy)")
    lb = report_loopback(part_b(size, repeats))
    lb["size"] = size
    lb["repeats"] = repeats
    lb["seconds"] = round(time.time() - started, 1)
    lb["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["loopback"] = lb
    result.setdefault("python", platform.python_version())
    result.setdefault("cpus", os.cpu_count())
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwrote bench/results/network.json (loopback part) in {lb['seconds']} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--skip-loopback", action="store_true")
    ap.add_argument("--loopback-only", action="store_true",
                    help="run only part B; keep the simulator results (and plots) of the "
                         "last run in bench/results/network.json")
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--profiles", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=120, help=argparse.SUPPRESS)
    ap.add_argument("--consumer", default="batch", help=argparse.SUPPRESS)
    ap.add_argument("--secure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--security-p99", action="store_true",
                    help="run only part C's paced runs (plain and secure at 5,000 ev/s, "
                         "alternating): the p99 ratio in a few minutes")
    ap.add_argument("--security-only", action="store_true",
                    help="run only the TLS+authentication comparison (one broker, with and "
                         "without security, same run); merged into "
                         "bench/results/network.json")
    a = ap.parse_args()
    if a.role == "subscriber":
        if os.environ.get("BENCH_UVLOOP"):
            from siftbus.broker.server import install_uvloop

            install_uvloop()
        asyncio.run(role_subscriber(a.port, a.profiles, a.expect, a.timeout, a.consumer,
                                    a.secure))
        return
    if a.role == "mqtt-subscriber":
        asyncio.run(role_mqtt_subscriber(a.port, a.profiles, a.expect, a.timeout))
        return
    size = "quick" if a.quick else "full" if a.full else "default"
    repeats = a.repeats or (1 if a.quick else 3)
    started = time.time()
    outdir = HERE / "results"
    outdir.mkdir(exist_ok=True)
    if a.loopback_only:
        loopback_only(size, repeats, outdir, started)
        return
    if a.security_p99:
        security_only("quick", a.repeats or 3, outdir, started, p99_only=True)
        return
    if a.security_only:
        security_only(size, max(repeats, 3), outdir, started)
        return
    res = part_a(size, repeats)
    for exp, key in {"E1": ("pe",), "E2": ("brokers",), "E3": ("sigma",), "E4": ("types",),
                     "E5": ("locality",)}.items():
        add_ratios(res[exp], key)
    cols = ["protocol", "fsat", "fsat_vs_EW", "bytes_per_event", "messages_per_event",
            "filter_ops_per_event", "duplication"]
    print(f"# siftbus broker network benchmark ({size}, {repeats} repeat(s), "
          f"{os.cpu_count()} CPUs, shared machine: noisy)")
    print(table(res["E1"], ["pe", *cols], "E1: 4 brokers in a line, p_e varied"))
    print(table(res["E2"], ["brokers", *cols], "E2: broker count (hub tree), p_e = 0.1"))
    print(table(res["E3"], ["sigma", "pe", *cols], "E3: σ identical copies, p_p = 0.9"))
    print(table(res["E4"], ["types", *cols], "E4: event types (RN of type i = B_i)"))
    print(table(res["E5"], ["locality", *cols], "E5: locality, p_e = 0.5"))
    print(table(res["E6"], ["profiles", "protocol", "max_table", "duplication",
                            "max_broker_mb", "subscribe_cpu_s"],
                "E6: memory per broker (4 brokers in a line)"))
    result: dict[str, Any] = {
        "size": size, "repeats": repeats, "cpus": os.cpu_count(),
        "python": platform.python_version(), "simulator": res,
        "simulator_loadavg": os.getloadavg(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result["plots"] = plots(res, outdir)
    if not a.skip_loopback:
        result["loopback"] = report_loopback(part_b(size, repeats))
        result["security"] = report_security(security_compare(size, max(repeats, 3)))
    elif (outdir / "network.json").exists():  # keep the last loopback measurement
        last_run = json.loads((outdir / "network.json").read_text())
        for key in ("loopback", "security"):
            if last_run.get(key) is not None:
                result[key] = last_run[key]
    result["seconds"] = round(time.time() - started, 1)
    (outdir / "network.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwrote bench/results/network.json and {len(result['plots'])} plots "
          f"in {result['seconds']} s")


if __name__ == "__main__":
    main()
