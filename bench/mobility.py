"""Mobility benchmark: the cost of a session handoff per protocol and topology
(Tarkoma ch. 5), in the simulator and on real brokers on loopback.

Part A (simulator, frames encoded as on the wire): a session subscriber with three
profiles moves between random brokers of a topology (line, star, random tree; 4-12
brokers) one move at a time, with static subscribers and a publisher around it. Per
handoff: broker-to-broker messages and bytes, and the handoff latency in message steps
(from the client's HELLO at the new broker until its session is there). The ping/pong
protocol is the baseline of the same run. ``covered``: the new broker already holds a
complete subscription covering every profile of the session (the rendezvous handoff then
sends no subscription update at all).

Part B (loopback, in-process brokers on 127.0.0.1): a 5-broker tree, a subscriber moving
every 200 ms while a publisher sends; per protocol: handoff latency (``move`` until the
new broker reports the session there), events/s sustained, and every event checked
exactly once. Baseline: the same subscriber reconnecting to the broker it is at.

Part C: memory per waiting session (the broker's own count of buffered bytes and the
Python heap growth measured with tracemalloc) for sessions away with 1,000 rows each.

    python bench/mobility.py            # ~2 minutes
    python bench/mobility.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from siftbus.broker.simulator import Simulator  # noqa: E402
from siftbus.model import Event, IntervalSet, Profile, parse_schema  # noqa: E402

SCHEMA = parse_schema('[T]\na = "int[0,99]"\nb = "int[0,1000000]"\n')
T = SCHEMA["T"]
PROTOCOLS = [("pingpong", "forwarding"), ("acyclic", "forwarding"),
             ("rendezvous", "rendezvous")]


def topology(kind: str, n: int, rng: random.Random) -> list[tuple[str, str]]:
    names = [f"B{i}" for i in range(n)]
    if kind == "line":
        return [(names[i], names[i + 1]) for i in range(n - 1)]
    if kind == "star":
        return [(names[0], x) for x in names[1:]]
    return [(names[rng.randint(0, i - 1)], names[i]) for i in range(1, n)]


def traffic(sim: Simulator) -> tuple[int, int]:
    """Broker-to-broker messages and bytes sent so far."""
    m = b = 0
    for node in sim.nodes.values():
        for link, lk in node.counters.links.items():
            if not link.startswith("@"):
                m += lk.messages_out
                b += lk.bytes_out
    return m, b


def sim_case(handoff: str, routing: str, kind: str, n: int, moves: int, covered: bool,
             seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    edges = topology(kind, n, rng)
    names = [f"B{i}" for i in range(n)]
    extra: dict[str, Any] = {"rendezvous": {"T": names[0]}} if routing == "rendezvous" else {}
    sim = Simulator(SCHEMA, names, edges, protocol=routing, handoff=handoff,
                    roundtrip=True, seed=seed, **extra)
    for i, b in enumerate(names):  # static subscribers: covering and overlapping state
        sim.add_client(f"s{i}", b)
        lo = rng.randint(0, 90)
        sim.subscribe(f"s{i}", [Profile.from_constraints(
            "f", T, {} if covered else {"a": IntervalSet.range(lo, lo + 9)})])
    sim.add_client("p", names[-1])
    sim.add_client("m", names[0], session=True)
    sim.subscribe("m", [Profile.from_constraints(f"f{k}", T, {"a": IntervalSet.range(
        10 * k, 10 * k + 4)}) for k in range(3)])
    sim.run()
    at = names[0]
    msgs, nbytes, steps = [], [], []
    for _ in range(moves):
        to = rng.choice([b for b in names if b != at])
        m0, b0 = traffic(sim)
        s0 = sim.steps
        sim.move("m", to)
        sim.run()
        sim.advance(1.0)
        m1, b1 = traffic(sim)
        msgs.append(m1 - m0)
        nbytes.append(b1 - b0)
        steps.append(sim.steps - s0)
        sim.publish("p", [Event(T, (rng.randint(0, 99), 0))])
        sim.run()
        at = to
    return {"handoff": handoff, "routing": routing, "topology": kind, "brokers": n,
            "covered": covered, "moves": moves,
            "messages": statistics.median(msgs), "bytes": statistics.median(nbytes),
            "steps": statistics.median(steps),
            "skipped": getattr(sim.nodes[at].handoff, "skipped", None)}


async def loopback(handoff: str, routing: str, rate: int, seconds: float,
                   reconnect_only: bool = False) -> dict[str, Any]:
    from broker.mobility import NAMES, close_all, start_tree, wait_for
    from siftbus.client import Client
    from siftbus.client.session import SessionState

    servers = await start_tree(handoff, routing)
    rng = random.Random(1)
    seen: Counter[int] = Counter()
    lat: list[float] = []
    cpu0 = time.process_time()
    try:
        state = SessionState("mover")
        at = "B3"
        c = await Client.connect(port=servers[at].port, session=state)
        await c.subscribe("f: T(a < 50)", lambda n: seen.update([n.event.keys[1]]))
        pub = await Client.connect(port=servers["B2"].port)
        await asyncio.sleep(0.3)
        sent = 0

        async def publish() -> None:  # paced at ``rate`` until 10 moves are done
            nonlocal sent
            t0 = time.monotonic()
            while len(lat) < 10 or time.monotonic() - t0 < seconds:
                due = int((time.monotonic() - t0) * rate) + 1
                if due > sent:
                    await pub.publish_batch([Event(T, (i % 100, i)) for i in range(sent, due)])
                    sent = due
                await asyncio.sleep(0.01)
            await pub.flush()

        t_start = time.monotonic()
        task = asyncio.ensure_future(publish())
        while not task.done():
            await asyncio.sleep(0.2)
            if not reconnect_only:
                at = rng.choice([b for b in NAMES if b != at])
            t0 = time.monotonic()
            await c.move("127.0.0.1", servers[at].port)
            await wait_for(lambda: state.status.get("state") != "arriving", 10)
            lat.append(time.monotonic() - t0)
        await task
        elapsed = time.monotonic() - t_start
        await pub.ping()
        want = {i for i in range(sent) if i % 100 < 50}
        await wait_for(lambda: set(seen) >= want, 60)
        await asyncio.sleep(0.2)
        exact = set(seen) == want and max(seen.values()) == 1
        await c.close()
        await pub.close()
    finally:
        await close_all(servers)
    return {"handoff": "reconnect" if reconnect_only else handoff, "routing": routing,
            "moves": len(lat), "latency_ms_p50": 1000 * statistics.median(lat),
            "latency_ms_max": 1000 * max(lat), "events": sent,
            "events_per_s": sent / elapsed, "cpu_s": time.process_time() - cpu0,
            "exactly_once": exact}


def memory(sessions: int, rows: int) -> dict[str, Any]:
    sim = Simulator(SCHEMA, ["B0"], [])
    sim.add_client("p", "B0")
    for i in range(sessions):
        sim.add_client(f"m{i}", "B0", session=True)
        sim.subscribe(f"m{i}", [Profile.from_constraints("f", T, {})])
    sim.run()
    for i in range(sessions):
        sim.disconnect(f"m{i}")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(0, rows, 500):
        sim.publish("p", [Event(T, (j % 100, j)) for j in range(k, k + 500)])
        sim.run()
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    st = sim.nodes["B0"].stats().sessions
    return {"sessions": sessions, "rows_each": rows,
            "buffered_bytes_per_session": st["buffered_bytes"] / sessions,
            "heap_bytes_per_session": heap / sessions,
            "bytes_per_row": st["buffered_bytes"] / (sessions * rows)}


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c])
                                     for c in cols) + " |")
    return "\n".join(out)


def plot(sim_rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for h, _ in PROTOCOLS:
        for covered, style in ((False, "-o"), (True, "--x")):
            pts = sorted((x["brokers"], x["messages"], x["bytes"]) for x in sim_rows
                         if x["handoff"] == h and x["topology"] == "line"
                         and x["covered"] == covered)
            if not pts:
                continue
            label = f"{h}{' (covered)' if covered else ''}"
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
            axes[1].plot([p[0] for p in pts], [p[2] / 1024 for p in pts], style, label=label)
    axes[0].set(xlabel="brokers (line)", ylabel="messages per handoff")
    axes[1].set(xlabel="brokers (line)", ylabel="KiB per handoff")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    moves = 5 if args.quick else 15
    sizes = [4, 8] if args.quick else [4, 8, 12]
    load0 = os.getloadavg()
    sim_rows = []
    for kind in ("line", "star", "tree"):
        for n in sizes:
            for covered in (False, True):
                for h, r in PROTOCOLS:
                    sim_rows.append(sim_case(h, r, kind, n, moves, covered, seed=n))
    print("## Part A: signalling per handoff (simulator, medians; pingpong = baseline)\n")
    print(table(sim_rows, ["topology", "brokers", "covered", "handoff", "messages",
                           "bytes", "steps"]))
    rate, secs = (2000, 2.0) if args.quick else (10_000, 3.0)
    loop_rows = []
    for h, r in PROTOCOLS[1:]:
        loop_rows.append(asyncio.run(loopback(h, r, rate, secs, reconnect_only=True)))
        loop_rows.append(asyncio.run(loopback(h, r, rate, secs)))
    print(f"\n## Part B: loopback, 5-broker tree, move every 200 ms at {rate} ev/s "
          "(reconnect = baseline, same broker)\n")
    print(table(loop_rows, ["handoff", "routing", "moves", "latency_ms_p50",
                            "latency_ms_max", "events_per_s", "cpu_s", "exactly_once"]))
    mem = [memory(s, 1000 if args.quick else 2000) for s in (10, 50)]
    print("\n## Part C: memory per waiting session\n")
    print(table(mem, ["sessions", "rows_each", "buffered_bytes_per_session",
                      "heap_bytes_per_session", "bytes_per_row"]))
    load = os.getloadavg()
    print(f"\nload average before {load0[0]:.1f}, after {load[0]:.1f}")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "mobility.json").write_text(json.dumps(
        {"simulator": sim_rows, "loopback": loop_rows, "memory": mem,
         "loadavg": [load0, load]}, indent=1))
    plot(sim_rows, out / "mobility.png")


if __name__ == "__main__":
    main()
