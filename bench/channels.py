"""Benchmark of the notification-channel layer (issue 7).

Scenarios (every figure with a baseline measured in the same run):

1. ``filtered``: one in-process channel, 1 / 100 / 10,000 filtered push consumers, each
   event matching about 3 of them; compiled filters (ConstraintIndex -> siftbus index)
   vs the plain per-filter ETCL evaluator. events/s and the ratio compiled/evaluator.
2. ``burst``: one remote supplier to one remote consumer over loopback (channel server in
   a subprocess), bursts of 10 ... 20,000 events, sent and received events/s; baseline:
   the same batches through the service's ``echo`` call (the thesis's EchoServer).
3. ``latency``: S in {1, 5, 10} suppliers x C in {1, 10, 50} consumers, 1,000 events/s in
   total, average/min/max latency and lost events (the thesis's tables A.1-A.3 shape);
   the consumers run in one or two worker processes, the suppliers in this one.
4. ``payload``: int arrays of 1 ... 1,024 elements in the body, events/s vs echo.

The thesis's published JacORB / OpenFusion / OpenORB figures are printed beside ours.
The machine is shared (2 cores, several engineers): figures are noisy; medians of
``--repeat`` runs are reported.

    python bench/channels.py --quick      # < 3 minutes
    python bench/channels.py              # default
    python bench/channels.py --full
    python bench/channels.py --bendt      # Bendt's scenarios A.1-A.9 (channels_bendt.py)
    python bench/channels.py --bendt --quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgpack

import channels_bendt
from channels_bendt import Server, median
from siftbus.channel import (
    SEQUENCE_EVENT,
    STRUCTURED_EVENT,
    EventChannelFactory,
    StructuredEvent,
)
from siftbus.channel import qos as Q
from siftbus.channel.remote import ChannelClient, RemotePushConsumer

RESULTS = Path(__file__).parent / "results" / "channels.json"

# The thesis's published figures (Bendt 2003, appendix A), events/s and ms.
THESIS_THROUGHPUT = {  # burst -> (OpenFusion sent, recv, OpenORB sent, recv, JacORB sent, recv)
    10: (196, 204, 85, 99, 200, 208), 100: (151, 149, 78, 78, 132, 131),
    1000: (148, 141, 71, 70, 141, 137), 5000: (152, 147, 71, 70, 129, 126),
    10000: (151, 148, 71, 70, 132, 127), 20000: (150, 146, 40, 39, 94, 91),
}
THESIS_LATENCY_AVG = {  # (suppliers, consumers) -> avg ms (OpenFusion, OpenORB, JacORB)
    (1, 1): (8, 16, 7), (1, 10): (38, 75, 37), (1, 50): (162, 2975, 197),
    (5, 1): (6, 18, 10), (5, 10): (49, 7576, 61), (5, 50): (498, 72221, 12546),
    (10, 1): (8, 39, 19), (10, 10): (61, 29879, 113), (10, 50): (411, 237776, 34179),
}
THESIS_PAYLOAD = {  # int array length -> received events/s (OpenFusion, OpenORB, JacORB)
    1: (162, 63, 161), 32: (145, 62, 108), 64: (136, 55, 101), 128: (105, 61, 94),
    256: (86, 49, 64), 512: (47, 25, 41), 1024: (21, 26, 25),
}


# ---------------------------------------------------------------------------------------
# 1. filtered consumers, in process


class _Sink:
    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def push_structured_event(self, e: StructuredEvent) -> None:
        with self.lock:
            self.count += 1


def filtered_run(n_consumers: int, n_events: int, compile_filters: bool,
                 seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    groups = max(1, n_consumers // 3)  # about 3 consumers per event
    factory = EventChannelFactory(compile_filters=compile_filters)
    try:
        ch, _ = factory.create_channel({Q.ORDER_POLICY: Q.FIFO_ORDER})
        ca = ch.default_consumer_admin
        ff = factory.filter_factory
        sink = _Sink()
        per_group = [0] * groups
        t_setup = time.perf_counter()
        for i in range(n_consumers):
            p, _ = ca.obtain_notification_push_supplier(STRUCTURED_EVENT)
            f = ff.create_filter()
            f.add_constraints([([("Sensors", "Reading")],
                                f"$sensor == {i % groups} and $.filterable_data(kind) == 'temp' "
                                f"and $value >= 0")])
            p.add_filter(f)
            p.connect_structured_push_consumer(sink)
            per_group[i % groups] += 1
        setup_s = time.perf_counter() - t_setup
        sup, _ = ch.default_supplier_admin.obtain_notification_push_consumer(SEQUENCE_EVENT)
        sup.connect_sequence_push_supplier()
        events = [StructuredEvent.of("Sensors", "Reading", "r", filterable_data={
            "sensor": rng.randrange(groups), "kind": "temp" if rng.random() < 0.9 else "hum",
            "value": round(rng.uniform(0, 40), 2)}) for _ in range(n_events)]
        expected = sum(per_group[e.filterable_data[0][1]] for e in events
                       if e.filterable_data[1][1] == "temp")
        sup.push_structured_events([events[0]])  # builds the index
        _wait(lambda: sink.count >= 1 or events[0].filterable_data[1][1] != "temp", 60)
        base = sink.count
        t0 = time.perf_counter()
        for i in range(0, n_events, 100):
            sup.push_structured_events(events[i:i + 100])
        t_push = time.perf_counter() - t0
        want = base + expected  # events[0] goes again with the others
        _wait(lambda: sink.count >= want, 300)
        elapsed = time.perf_counter() - t0
        stats = ch.stats()
        return {"consumers": n_consumers, "events": n_events, "compiled": compile_filters,
                "deliveries": sink.count - base, "expected": want - base,
                "events_per_s": n_events / elapsed, "push_events_per_s": n_events / t_push,
                "deliveries_per_event": (sink.count - base) / n_events,
                "setup_s": setup_s, "lost": (want - sink.count), "discarded": stats.discarded}
    finally:
        factory.close()


def _wait(pred: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise RuntimeError("benchmark deliveries did not complete in time")
        time.sleep(0.001)


def bench_filtered(sizes: list[int], events: dict[int, int], eval_events: dict[int, int],
                   repeat: int) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        comp = [filtered_run(n, events[n], True, 7 + r) for r in range(repeat)]
        ev = [filtered_run(n, eval_events[n], False, 7 + r) for r in range(repeat)]
        c, e = median([x["events_per_s"] for x in comp]), median([x["events_per_s"] for x in ev])
        out.append({"consumers": n, "compiled_events_per_s": c, "evaluator_events_per_s": e,
                    "ratio": c / e if e else 0.0,
                    "deliveries_per_event": comp[0]["deliveries_per_event"],
                    "lost": sum(x["lost"] for x in comp + ev),
                    "runs": {"compiled": comp, "evaluator": ev}})
        print(f"  filtered {n:>6} consumers: compiled {c:10.0f} ev/s, evaluator {e:10.0f} "
              f"ev/s, x{c / e if e else 0:.1f}", file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------
# Remote scenarios: a channel server subprocess on 127.0.0.1


def _event(i: int, body: Any = None) -> dict[str, Any]:
    return StructuredEvent.of("Bench", "Tick", "t", filterable_data={"i": i, "ts": time.time()},
                              remainder_of_body=body).to_dict()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def _burst_once(port: int, n: int, batch: int, body: Any = None, mode: str = "push",
                      server_pid: int = 0, pipeline: int = 1) -> dict[str, float]:
    """``mode`` push: the service pushes to a RemotePushConsumer (acknowledged window);
    pull: the consumer long-polls (the way remote consumers worked before push).
    ``pipeline``: push calls the supplier keeps in flight (1 = wait for each reply)."""
    sup_c = await ChannelClient.connect("127.0.0.1", port)
    con_c = await ChannelClient.connect("127.0.0.1", port)
    try:
        cid = await sup_c.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
        sid = await sup_c.call("obtain_supplier", channel=cid)
        got = 0
        last = 0.0
        all_in = asyncio.Event()

        def on_event(raw: bytes) -> None:
            nonlocal got, last
            got += 1
            if got >= n:
                last = time.perf_counter()
                all_in.set()

        if mode == "push":
            consumer = await RemotePushConsumer.obtain(con_c, cid, on_event, raw=True)

            async def consume() -> None:
                await all_in.wait()
        else:
            pid = await con_c.call("obtain_consumer", channel=cid)

            async def consume() -> None:
                nonlocal got, last
                ack = None
                while got < n:
                    items = await con_c.call("pull", channel=cid, proxy=pid, max=5000,
                                             ack=ack, timeout=2.0, packed=True)
                    if not items:
                        continue
                    ack = items[-1][0]
                    got += len(items)
                    last = time.perf_counter()

        task = asyncio.ensure_future(consume())
        evs = [_event(i, body) for i in range(n)]
        cpu0 = cpu_seconds(server_pid) if server_pid else 0.0
        t0 = time.perf_counter()
        slots = asyncio.Semaphore(pipeline)

        async def push_one(part: list[Any]) -> None:
            try:
                await sup_c.call("push", channel=cid, proxy=sid, events=part)
            finally:
                slots.release()

        calls = []
        for i in range(0, n, batch):
            await slots.acquire()
            calls.append(asyncio.ensure_future(push_one(evs[i:i + batch])))
        await asyncio.gather(*calls)
        t_sent = time.perf_counter() - t0
        await asyncio.wait_for(task, 120)
        t_recv = last - t0
        server_cpu = (cpu_seconds(server_pid) - cpu0) if server_pid else 0.0
        if mode == "push":
            await consumer.disconnect()
        # the baseline: the same frames through a call that does nothing
        t1 = time.perf_counter()
        for i in range(0, n, batch):
            await sup_c.call("echo", events=evs[i:i + batch])
        t_echo = time.perf_counter() - t1
        await sup_c.call("destroy_channel", channel=cid)
        return {"sent_per_s": n / t_sent, "received_per_s": n / t_recv,
                "echo_per_s": n / t_echo, "lost": n - got,
                "server_cpu_s": server_cpu,
                "per_server_cpu_s": n / server_cpu if server_cpu else 0.0}
    finally:
        await sup_c.close()
        await con_c.close()


def bench_burst(port: int, bursts: list[int], batch: int, repeat: int,
                server_pid: int = 0, pipeline: int = 1) -> list[dict[str, Any]]:
    out = []
    for n in bursts:
        runs, pulls = [], []
        for _ in range(repeat):  # interleaved, so both see the same machine load
            runs.append(asyncio.run(_burst_once(port, n, batch, None, "push", server_pid,
                                                pipeline)))
            pulls.append(asyncio.run(_burst_once(port, n, batch, None, "pull", server_pid,
                                                 pipeline)))
        row = {"burst": n, "batch": batch, "pipeline": pipeline,
               **{k: median([r[k] for r in runs]) for k in runs[0]},
               "lost": sum(r["lost"] for r in runs + pulls),
               "pull_received_per_s": median([r["received_per_s"] for r in pulls]),
               "pull_per_server_cpu_s": median([r["per_server_cpu_s"] for r in pulls]),
               "runs": runs, "pull_runs": pulls}
        row["ratio_vs_echo"] = row["received_per_s"] / row["echo_per_s"]
        out.append(row)
        print(f"  burst {n:>6}: sent {row['sent_per_s']:9.0f}/s received "
              f"{row['received_per_s']:9.0f}/s (pull {row['pull_received_per_s']:9.0f}/s) "
              f"echo {row['echo_per_s']:9.0f}/s; per server CPU s "
              f"{row['per_server_cpu_s']:9.0f}", file=sys.stderr, flush=True)
    return out


def bench_payload(port: int, sizes: list[int], n: int, batch: int,
                  repeat: int) -> list[dict[str, Any]]:
    out = []
    for size in sizes:
        body = list(range(size))
        runs = [asyncio.run(_burst_once(port, n, batch, body)) for _ in range(repeat)]
        row = {"ints": size, "bytes": 4 * size,
               **{k: median([r[k] for r in runs]) for k in runs[0]},
               "lost": sum(r["lost"] for r in runs)}
        row["ratio_vs_echo"] = row["received_per_s"] / row["echo_per_s"]
        out.append(row)
        print(f"  payload {size:>5} ints: received {row['received_per_s']:9.0f}/s echo "
              f"{row['echo_per_s']:9.0f}/s", file=sys.stderr, flush=True)
    return out


async def _consume_many(port: int, cid: int, pids: list[int], total: int, linger: float,
                        deadline: float) -> tuple[list[float], list[int]]:
    """``pids`` empty entries (0): obtain push consumers here (they belong to this
    process's connections); else pull from the given pull proxies."""
    conns = [await ChannelClient.connect("127.0.0.1", port) for _ in pids]
    lat: list[float] = []
    counts = [0] * len(pids)
    if not any(pids):
        everyone = asyncio.Event()

        def on_event(k: int) -> Any:
            def handle(raw: bytes) -> None:
                now = time.time()
                w = msgpack.unpackb(raw)
                lat.append(now - w["structured"]["filterable_data"][1]["value"])
                counts[k] += 1
                if counts[k] == total and all(c >= total for c in counts):
                    everyone.set()
            return handle

        consumers = [await RemotePushConsumer.obtain(conns[k], cid, on_event(k), raw=True,
                                                     linger=linger)
                     for k in range(len(pids))]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(everyone.wait(), max(0.1, deadline - time.time()))
        for c in consumers:
            await c.disconnect()
        for conn in conns:
            await conn.close()
        return lat, counts

    async def consume(k: int) -> None:
        ack = None
        while counts[k] < total and time.time() < deadline:
            items = await conns[k].call("pull", channel=cid, proxy=pids[k], max=1000,
                                        ack=ack, timeout=0.5, linger=linger, packed=True)
            now = time.time()
            if items:
                ack = items[-1][0]
                counts[k] += len(items)
                for _, raw in items:
                    w = msgpack.unpackb(raw)
                    lat.append(now - w["structured"]["filterable_data"][1]["value"])

    try:
        await asyncio.gather(*(consume(k) for k in range(len(pids))))
    finally:
        for c in conns:
            await c.close()
    return lat, counts


def _consumer_process(port: int, cid: int, pids: list[int], total: int, linger: float,
                      deadline: float, out: Any) -> None:
    """A worker process with some of the consumers (the clients' decoding must not share
    one core with the suppliers: the thesis ran its clients on another machine)."""
    lat, counts = asyncio.run(_consume_many(port, cid, pids, total, linger, deadline))
    out.put((lat, counts))


def _latency_once(port: int, n_sup: int, n_con: int, rate: float, duration: float,
                  linger: float, mode: str = "push") -> dict[str, Any]:
    import multiprocessing as mp

    async def setup() -> tuple[int, list[int]]:
        admin = await ChannelClient.connect("127.0.0.1", port)
        try:
            cid = await admin.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
            if mode == "push":  # the worker processes obtain their push consumers
                return cid, [0] * n_con
            return cid, [await admin.call("obtain_consumer", channel=cid)
                         for _ in range(n_con)]
        finally:
            await admin.close()

    cid, pids = asyncio.run(setup())
    per_sup = int(rate * duration / n_sup)
    total = per_sup * n_sup
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    workers = 2 if n_con >= 10 else 1
    deadline = time.time() + duration + 60
    procs = [ctx.Process(target=_consumer_process, daemon=True,
                         args=(port, cid, pids[w::workers], total, linger, deadline, results))
             for w in range(workers)]
    for proc in procs:
        proc.start()

    async def supply_all() -> float:
        sups = [await ChannelClient.connect("127.0.0.1", port) for _ in range(n_sup)]
        try:
            sids = [await s.call("obtain_supplier", channel=cid) for s in sups]
            end = time.monotonic() + 60
            while (await sups[0].call("stats", channel=cid))["consumers"] < n_con:
                if time.monotonic() > end:
                    raise RuntimeError("the consumer processes did not connect")
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # let the worker processes settle

            async def supply(j: int) -> None:
                # Pushes keep the schedule: a push does not wait for the previous reply
                # (pipelined on the connection), so the offered rate is really offered.
                interval = n_sup / rate
                t_next = time.perf_counter() + random.random() * interval
                pending = []
                for i in range(per_sup):
                    delay = t_next - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    pending.append(asyncio.ensure_future(sups[j].call(
                        "push", channel=cid, proxy=sids[j], events=[_event(i)])))
                    t_next += interval
                await asyncio.gather(*pending)

            t0 = time.perf_counter()
            await asyncio.gather(*(supply(j) for j in range(n_sup)))
            return time.perf_counter() - t0
        finally:
            for s in sups:
                await s.close()

    t_sent = asyncio.run(supply_all())
    lat: list[float] = []
    got = 0
    for _ in procs:
        part, counts = results.get(timeout=max(5.0, deadline - time.time() + 5))
        lat.extend(part)
        got += sum(counts)
    for proc in procs:
        proc.join(10)

    async def destroy() -> None:
        admin = await ChannelClient.connect("127.0.0.1", port)
        try:
            await admin.call("destroy_channel", channel=cid)
        finally:
            await admin.close()

    asyncio.run(destroy())
    lat_ms = [x * 1000 for x in lat]
    return {"suppliers": n_sup, "consumers": n_con, "events": total, "mode": mode,
            "offered_rate": rate, "achieved_rate": total / t_sent,
            "consumer_processes": workers,
            "avg_ms": statistics.fmean(lat_ms) if lat_ms else 0.0,
            "min_ms": min(lat_ms, default=0.0), "max_ms": max(lat_ms, default=0.0),
            "p99_ms": (sorted(lat_ms)[int(0.99 * (len(lat_ms) - 1))] if lat_ms else 0.0),
            "lost": total * n_con - got}


def bench_latency(port: int, matrix: list[tuple[int, int]], rate: float, duration: float,
                  linger: float, repeat: int, mode: str = "push") -> list[dict[str, Any]]:
    out = []
    for s, c in matrix:
        runs = [_latency_once(port, s, c, rate, duration, linger, mode)
                for _ in range(repeat)]
        row = {k: (median([r[k] for r in runs]) if isinstance(runs[0][k], float) else runs[0][k])
               for k in runs[0]}
        row["lost"] = sum(r["lost"] for r in runs)
        row["linger_ms"] = linger * 1000
        row["runs"] = runs
        out.append(row)
        print(f"  latency {s:>2}x{c:<2}: avg {row['avg_ms']:7.1f} ms max {row['max_ms']:7.1f} "
              f"lost {row['lost']}", file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------


def report(res: dict[str, Any]) -> str:
    lines = ["## siftbus channels benchmark", "",
             f"mode {res['mode']}, repeat {res['repeat']}, python {res['python']}, "
             f"{res['cpus']} CPUs (shared machine: noisy figures); medians", ""]
    lines += ["### Filtered push consumers, one channel, in process (compiled vs evaluator)", "",
              "| consumers | deliveries/event | compiled ev/s | evaluator ev/s | ratio |",
              "|---:|---:|---:|---:|---:|"]
    for r in res["filtered"]:
        lines.append(f"| {r['consumers']} | {r['deliveries_per_event']:.2f} | "
                     f"{r['compiled_events_per_s']:.0f} | {r['evaluator_events_per_s']:.0f} | "
                     f"{r['ratio']:.1f}x |")
    lines += ["", "### Burst throughput, 1 supplier -> 1 consumer over loopback", "",
              "| burst | siftbus sent/s | siftbus recv/s (push) | recv/s per server CPU s | "
              "pull recv/s (same run) | echo baseline/s | recv/echo | "
              "OpenFusion s/r | OpenORB s/r | JacORB s/r |",
              "|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in res["burst"]:
        t = THESIS_THROUGHPUT.get(r["burst"], (0,) * 6)
        lines.append(f"| {r['burst']} | {r['sent_per_s']:.0f} | {r['received_per_s']:.0f} | "
                     f"{r.get('per_server_cpu_s', 0):.0f} | "
                     f"{r.get('pull_received_per_s', 0):.0f} | "
                     f"{r['echo_per_s']:.0f} | {r['ratio_vs_echo']:.2f} | {t[0]}/{t[1]} | "
                     f"{t[2]}/{t[3]} | {t[4]}/{t[5]} |")
    if res["burst"]:
        lines += ["", f"(supplier: batches of {res['burst'][0]['batch']}, "
                  f"{res['burst'][0].get('pipeline', 1)} push calls in flight; server CPU "
                  "from /proc in 10 ms ticks, 0 = too short to tell)"]
    mode = res["latency"][0].get("mode", "pull") if res["latency"] else ""
    linger = res["latency"][0].get("linger_ms", 5.0) if res["latency"] else 0.0
    lines += ["", "### Latency, S suppliers x C consumers, "
              f"{res['latency_rate']:.0f} events/s in total over loopback "
              f"({mode} consumers, linger {linger:g} ms)", "",
              "| S x C | events | avg ms | min ms | max ms | p99 ms | lost | "
              "OpenFusion avg | OpenORB avg | JacORB avg |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["latency"]:
        t = THESIS_LATENCY_AVG.get((r["suppliers"], r["consumers"]), (0, 0, 0))
        lines.append(f"| {r['suppliers']}x{r['consumers']} | {r['events']} | {r['avg_ms']:.1f} | "
                     f"{r['min_ms']:.1f} | {r['max_ms']:.1f} | {r['p99_ms']:.1f} | {r['lost']} | "
                     f"{t[0]} | {t[1]} | {t[2]} |")
    lines += ["", "(thesis rows: 250 ms between events per supplier, i.e. 4-40 events/s in "
              "total; ours run at the rate above)", "",
              "### Payload size, 1 supplier -> 1 consumer", "",
              "| ints (bytes) | siftbus recv/s | echo/s | recv/echo | OpenFusion | OpenORB | "
              "JacORB |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["payload"]:
        t = THESIS_PAYLOAD.get(r["ints"], (0, 0, 0))
        lines.append(f"| {r['ints']} ({r['bytes']}) | {r['received_per_s']:.0f} | "
                     f"{r['echo_per_s']:.0f} | {r['ratio_vs_echo']:.2f} | {t[0]} | {t[1]} | "
                     f"{t[2]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a short run (< 3 minutes)")
    g.add_argument("--full", action="store_true", help="more events and repetitions")
    ap.add_argument("--bendt", action="store_true",
                    help="Bendt's scenarios (tables A.1-A.9) with the thesis's parameters "
                         "(about 6 minutes; with --quick seconds): writes "
                         "results/channels_bendt.{json,md} and PNG plots")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--only", choices=["filtered", "burst", "latency", "payload"],
                    action="append")
    ap.add_argument("--consumers", choices=["push", "pull"], default="push",
                    help="latency consumers: server-side push (default) or long-poll pulls")
    ap.add_argument("--pipeline", type=int, default=4,
                    help="push calls a burst supplier keeps in flight (1: wait for each)")
    ap.add_argument("--linger", type=float, default=0.002,
                    help="seconds a push (or pull reply) may wait to batch (latency runs)")
    ap.add_argument("--matrix", default=None,
                    help="latency cells to run, e.g. '1x1,10x50' (default: by mode)")
    a = ap.parse_args(argv)
    if a.bendt:
        out_dir = a.out.parent
        bendt = channels_bendt.run(a.quick, out_dir)
        print(channels_bendt.report(bendt))
        print(f"\n(wrote {out_dir}/channels_bendt.json, .md, {', '.join(bendt['plots'])}; "
              f"{bendt['elapsed_s']:.0f} s)")
        return
    mode = "quick" if a.quick else "full" if a.full else "default"
    repeat = a.repeat or {"quick": 1, "default": 3, "full": 5}[mode]
    sizes = [1, 100, 10_000]
    scale = {"quick": 1, "default": 2, "full": 5}[mode]
    events = {1: 5000 * scale, 100: 5000 * scale, 10_000: 5000 * scale}
    eval_events = {1: 5000 * scale, 100: 1000 * scale, 10_000: 20 * scale}
    bursts = [10, 100, 1000, 5000, 10000, 20000] if mode != "quick" else [10, 1000, 20000]
    matrix = [(s, c) for s in (1, 5, 10) for c in (1, 10, 50)]
    if mode == "quick":
        matrix = [(1, 1), (1, 10), (5, 10), (10, 50)]
    duration = {"quick": 2.0, "default": 3.0, "full": 5.0}[mode]
    payload_sizes = [1, 32, 64, 128, 256, 512, 1024]
    only = set(a.only or ["filtered", "burst", "latency", "payload"])
    res: dict[str, Any] = {"mode": mode, "repeat": repeat, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "latency_rate": 1000.0,
                           "filtered": [], "burst": [], "latency": [], "payload": [],
                           "loadavg_start": os.getloadavg()}
    t0 = time.perf_counter()
    if "filtered" in only:
        res["filtered"] = bench_filtered(sizes, events, eval_events, repeat)
        res["loadavg_filtered"] = os.getloadavg()
    if only & {"burst", "latency", "payload"}:
        server = Server()
        try:
            if "burst" in only:
                res["burst"] = bench_burst(server.port, bursts, 100, repeat, server.proc.pid,
                                           a.pipeline)
                res["loadavg_burst"] = os.getloadavg()
            if "latency" in only:
                if a.matrix:
                    matrix = [(int(x), int(y)) for x, y in
                              (cell.split("x") for cell in a.matrix.split(","))]
                res["latency"] = bench_latency(server.port, matrix, 1000.0, duration,
                                               a.linger, 1 if mode == "quick" else repeat,
                                               a.consumers)
                res["loadavg_latency"] = os.getloadavg()
            if "payload" in only:
                res["payload"] = bench_payload(server.port, payload_sizes,
                                               1000 if mode == "quick" else 3000, 100,
                                               repeat)
                res["loadavg_payload"] = os.getloadavg()
        finally:
            server.close()
    res["elapsed_s"] = time.perf_counter() - t0
    res["loadavg_end"] = os.getloadavg()
    if a.only and a.out.exists():  # a partial run updates its sections of the last results
        previous = json.loads(a.out.read_text())
        if previous.get("mode") == mode:
            res = {**previous, **{k: v for k, v in res.items()
                                  if k not in ("filtered", "burst", "latency", "payload")
                                  or k in only}}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(report(res))
    print(f"\n(wrote {a.out}; {res['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
