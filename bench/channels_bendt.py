"""Bendt's measurement scenarios (thesis ch. 6, tables A.1-A.9) on siftbus channels.

Run through ``python bench/channels.py --bendt [--quick]``. Three of the thesis's
scenarios with its parameters, and a throughput matrix it did not measure:

1. latency without filters (A.1-A.3): S in {1, 5, 10} suppliers x C in {1, 10, 50}
   consumers; each supplier sends 100 events, 250 ms apart, and blocks after each until
   every consumer has it (or 10 s); min/max/avg latency and the mean cycle per event
   (the thesis's "Mittlere Bearbeitungszeit", which includes the 250 ms pause).
2. latency with filters (A.4-A.6): 1 supplier, C consumers, one filter per consumer
   proxy so that each consumer receives exactly one of the 100 events.
3. filter evaluation (A.7-A.9): one filter with one of the thesis's expressions I-VII,
   ``match`` called 100 times (Any events for I and IV-VII, structured for II and III),
   total ms per 100 calls. V and VI are run as meant (``phone_numbers``) and, as printed
   in the thesis, with its ``phone_nubers`` typo (which makes them FALSE).
4. throughput (not in the thesis, which measured only 1 -> 1, tables A.10-A.13, see the
   default ``channels.py`` run): 1->1, 1->n, n->1, n->n, unfiltered, every consumer with a
   filter that passes everything, and with a filter that passes 1/C of the events.

As in the thesis all clients run in one process (here: one asyncio loop) and the channel
service in another (the thesis used a second machine on 100 MBit Ethernet; here both
are on 127.0.0.1 of one shared 2-core machine). The thesis's numbers are printed beside
ours: its own, other hardware (unspecified, 2003), Java ORBs; compare shapes, not values.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import msgpack

from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel import qos as Q
from siftbus.channel.remote import ChannelClient, RemotePushConsumer

RESULTS = Path(__file__).parent / "results"
PRODUCTS = ("OpenFusion", "OpenORB", "JacORB")

# Tables A.1-A.3: (S, C) -> product -> (mean cycle ms, min, max, avg latency ms)
THESIS_UNFILTERED: dict[tuple[int, int], dict[str, tuple[int, int, int, int]]] = {
    (1, 1): {"OpenFusion": (285, 5, 103, 8), "OpenORB": (275, 9, 167, 16),
             "JacORB": (264, 6, 36, 7)},
    (1, 10): {"OpenFusion": (415, 22, 217, 38), "OpenORB": (272, 53, 245, 75),
              "JacORB": (267, 16, 173, 37)},
    (1, 50): {"OpenFusion": (1021, 84, 385, 162), "OpenORB": (367, 685, 4752, 2975),
              "JacORB": (296, 138, 391, 197)},
    (5, 1): {"OpenFusion": (353, 4, 163, 6), "OpenORB": (278, 13, 154, 18),
             "JacORB": (265, 7, 146, 10)},
    (5, 10): {"OpenFusion": (487, 8, 582, 49), "OpenORB": (413, 130, 11709, 7576),
              "JacORB": (303, 13, 352, 61)},
    (5, 50): {"OpenFusion": (1655, 113, 4075, 498), "OpenORB": (1720, 655, 137742, 72221),
              "JacORB": (949, 314, 21762, 12546)},
    (10, 1): {"OpenFusion": (420, 4, 252, 8), "OpenORB": (294, 17, 298, 39),
              "JacORB": (288, 10, 424, 19)},
    (10, 10): {"OpenFusion": (638, 5, 659, 61), "OpenORB": (844, 160, 52456, 29879),
               "JacORB": (431, 33, 789, 113)},
    (10, 50): {"OpenFusion": (2534, 113, 3253, 411), "OpenORB": (4696, 677, 431192, 237776),
               "JacORB": (1931, 192, 53812, 34179)},
}
# Tables A.4-A.6: C -> product -> (mean cycle ms, min, max (None: one delivery), avg)
THESIS_FILTERED: dict[int, dict[str, tuple[int, int, int | None, int]]] = {
    1: {"OpenFusion": (294, 9, None, 9), "OpenORB": (269, 99, None, 99),
        "JacORB": (265, 15, None, 15)},
    10: {"OpenFusion": (465, 28, 30, 28), "OpenORB": (301, 19, 141, 38),
         "JacORB": (269, 31, 100, 47)},
    50: {"OpenFusion": (1394, 45, 556, 195), "OpenORB": (406, 18, 592, 91),
         "JacORB": (317, 131, 445, 211)},
}
# Tables A.7-A.9: expression -> ms (OpenFusion, OpenORB, JacORB)
THESIS_FILTER_MS: dict[str, tuple[int, int, int]] = {
    "I": (2, 4, 2), "II": (11, 54, 18), "III": (9, 49, 15), "IV": (33, 31, 35),
    "V": (59, 37, 36), "VI": (83, 43, 36), "VII": (124, 49, 35),
}
P0 = "$.phone_numbers[0]"
EXPRESSIONS: dict[str, str] = {
    "I": "$ == 10",
    "II": "$event_name == 'TESTING'",
    "III": "$type_name == 'TESTING'",
    "IV": f"{P0} == '12345678'",
    "V": f"exist {P0} and {P0} == '12345678'",
    "VI": f"exist {P0} and exist {P0} and {P0} == '12345678'",
    "VII": f"exist {P0} and exist {P0} and exist {P0} and {P0} == '12345678'",
    # as printed in the thesis (typo phone_nubers): FALSE on the same event
    "V (as printed)": "exist $.phone_nubers[0] and $.phone_numbers[0] == '12345678'",
    "VI (as printed)": f"exist {P0} and exist $.phone_nubers[0] and {P0} == '12345678'",
}


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


class Server:
    """A channel service subprocess on 127.0.0.1 (port 0)."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        port_file = Path(self.dir.name) / "port"
        self.proc = subprocess.Popen([sys.executable, "-m", "siftbus.channel.remote",
                                      "--port-file", str(port_file)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("channel server did not start")
            time.sleep(0.02)
        self.port = int(port_file.read_text())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.dir.cleanup()


def _fields(raw: bytes) -> dict[str, Any]:
    w = msgpack.unpackb(raw)
    return {p["name"]: p["value"] for p in w["structured"]["filterable_data"]}


def _event(s: int, i: int, g: int = 0) -> dict[str, Any]:
    return StructuredEvent.of("Bench", "Tick", "t", filterable_data={
        "s": s, "i": i, "g": g, "ts": time.time()}).to_dict()


# ---------------------------------------------------------------------------------------
# scenarios 1 and 2: closed-loop latency


async def closed_loop(port: int, n_sup: int, n_con: int, events: int, interval: float,
                      filtered: bool, timeout: float = 10.0) -> dict[str, Any]:
    """Each supplier: push, wait until every consumer meant to get it has it, pause."""
    admin = await ChannelClient.connect("127.0.0.1", port)
    cid = await admin.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    counts: dict[tuple[int, int], int] = {}
    need: dict[tuple[int, int], int] = {}
    done: dict[tuple[int, int], asyncio.Event] = {}
    lat: list[float] = []
    conns = [await ChannelClient.connect("127.0.0.1", port) for _ in range(n_con)]

    def on_event(raw: bytes) -> None:
        now = time.time()
        f = _fields(raw)
        lat.append(now - f["ts"])
        key = (f["s"], f["i"])
        counts[key] = counts.get(key, 0) + 1
        if counts[key] >= need.get(key, n_con) and key in done:
            done[key].set()

    consumers = []
    for k in range(n_con):
        # scenario 2: consumer k gets exactly event k of each supplier
        constraints = [[[], f"$i == {k}"]] if filtered else None
        consumers.append(await RemotePushConsumer.obtain(conns[k], cid, on_event, raw=True,
                                                         constraints=constraints))
    sups = [await ChannelClient.connect("127.0.0.1", port) for _ in range(n_sup)]
    sids = [await s.call("obtain_supplier", channel=cid) for s in sups]
    cycles: list[float] = []
    timeouts = 0

    async def supply(j: int) -> None:
        nonlocal timeouts
        for i in range(events):
            key = (j, i)
            need[key] = (1 if i < n_con else 0) if filtered else n_con
            ev = done[key] = asyncio.Event()
            if need[key] == 0 or counts.get(key, 0) >= need[key]:
                ev.set()
            t0 = time.perf_counter()
            await sups[j].call("push", channel=cid, proxy=sids[j], events=[_event(j, i)])
            try:
                await asyncio.wait_for(ev.wait(), timeout)
            except TimeoutError:
                timeouts += 1
            await asyncio.sleep(interval)
            cycles.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(supply(j) for j in range(n_sup)))
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(0.05)
    for c in consumers:
        await c.disconnect()
    await admin.call("destroy_channel", channel=cid)
    for conn in [*conns, *sups, admin]:
        await conn.close()
    ms = [x * 1000 for x in lat]
    expected = n_sup * (min(n_con, events) if filtered else events * n_con)
    return {"suppliers": n_sup, "consumers": n_con, "events_per_supplier": events,
            "interval_ms": interval * 1000, "filtered": filtered,
            "deliveries": len(ms), "expected_deliveries": expected,
            "cycle_ms": statistics.fmean(cycles) * 1000 if cycles else 0.0,
            "min_ms": min(ms, default=0.0), "max_ms": max(ms, default=0.0),
            "avg_ms": statistics.fmean(ms) if ms else 0.0, "timeouts": timeouts,
            "elapsed_s": elapsed}


# ---------------------------------------------------------------------------------------
# scenario 3: filter evaluation


def filter_times(calls: int, repeat: int) -> list[dict[str, Any]]:
    factory = EventChannelFactory()
    try:
        ff = factory.filter_factory
        any_num = 10
        any_person = {"name": "Bendt", "phone_numbers": ["12345678", "87654321"]}
        structured = StructuredEvent.of("TESTING", "TESTING", "TESTING",
                                        filterable_data={"x": 1})
        out = []
        for name, expr in EXPRESSIONS.items():
            f = ff.create_filter()
            f.add_constraints([([], expr)])
            call: Callable[[], bool]
            if name in ("II", "III"):
                call, kind = partial(f.match_structured, structured), "structured"
            else:
                call, kind = partial(f.match, any_num if name == "I" else any_person), "any"
            result = call()
            runs = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                for _ in range(calls):
                    call()
                runs.append((time.perf_counter() - t0) * 1000)
            base = name.split()[0]
            out.append({"expression": name, "text": expr, "event": kind, "matches": result,
                        "calls": calls, "ms": median(runs),
                        "us_per_call": median(runs) * 1000 / calls,
                        "thesis_ms": dict(zip(PRODUCTS, THESIS_FILTER_MS[base], strict=True))
                        if name in THESIS_FILTER_MS else None, "runs_ms": runs})
            f.destroy()
        return out
    finally:
        factory.close()


# ---------------------------------------------------------------------------------------
# 4: throughput matrix (beyond the thesis)


async def throughput(port: int, n_sup: int, n_con: int, total: int,
                     filt: str, batch: int = 10) -> dict[str, Any]:
    """Suppliers push ``total`` events in all as fast as replies allow (pipelined);
    ``filt``: none, all (a filter passing everything), share (1/C of the events each)."""
    admin = await ChannelClient.connect("127.0.0.1", port)
    cid = await admin.call("create_channel", qos={Q.ORDER_POLICY: Q.FIFO_ORDER})
    conns = [await ChannelClient.connect("127.0.0.1", port) for _ in range(n_con)]
    per_sup = total // n_sup
    expected = per_sup * n_sup * (1 if filt == "share" else n_con)
    got = 0
    finished = asyncio.Event()
    last = 0.0

    def on_event(raw: bytes) -> None:
        nonlocal got, last
        got += 1
        if got >= expected:
            last = time.perf_counter()
            finished.set()

    consumers = []
    for k in range(n_con):
        constraints = {"none": None, "all": [[[], "$i >= 0"]],
                       "share": [[[], f"$g == {k}"]]}[filt]
        consumers.append(await RemotePushConsumer.obtain(conns[k], cid, on_event, raw=True,
                                                         constraints=constraints,
                                                         linger=0.001))
    sups = [await ChannelClient.connect("127.0.0.1", port) for _ in range(n_sup)]
    sids = [await s.call("obtain_supplier", channel=cid) for s in sups]
    evs = [[_event(j, i, i % n_con) for i in range(per_sup)] for j in range(n_sup)]
    # one event outside the timing first: it builds the filter index (and its kernels)
    expected += n_con if filt == "none" else 0
    await sups[0].call("push", channel=cid, proxy=sids[0], events=[_event(0, -1, -1)])
    await asyncio.sleep(0.3)

    async def supply(j: int) -> None:
        slots = asyncio.Semaphore(4)
        pending = []

        async def one(part: list[Any]) -> None:
            try:
                await sups[j].call("push", channel=cid, proxy=sids[j], events=part)
            finally:
                slots.release()

        for i in range(0, per_sup, batch):
            await slots.acquire()
            pending.append(asyncio.ensure_future(one(evs[j][i:i + batch])))
        await asyncio.gather(*pending)

    t0 = time.perf_counter()
    await asyncio.gather(*(supply(j) for j in range(n_sup)))
    t_sent = time.perf_counter() - t0
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(finished.wait(), 60)
    t_recv = (last or time.perf_counter()) - t0
    for c in consumers:
        await c.disconnect()
    await admin.call("destroy_channel", channel=cid)
    for conn in [*conns, *sups, admin]:
        await conn.close()
    warm = n_con if filt == "none" else 0
    return {"suppliers": n_sup, "consumers": n_con, "filter": filt,
            "events": per_sup * n_sup, "deliveries": got - warm, "expected": expected - warm,
            "sent_per_s": per_sup * n_sup / t_sent, "events_per_s": per_sup * n_sup / t_recv,
            "deliveries_per_s": (got - warm) / t_recv}


# ---------------------------------------------------------------------------------------


def _thesis_cells(t: tuple[Any, ...]) -> str:
    return " / ".join("-" if v is None else str(v) for v in t)


def report(res: dict[str, Any]) -> str:
    p = res["params"]
    lines = ["## Bendt's scenarios (thesis ch. 6, tables A.1-A.9) on siftbus channels", "",
             f"mode {res['mode']}; {p['events']} events per supplier, {p['interval_ms']:g} ms "
             f"apart; python {res['python']}, {res['cpus']} CPUs (shared); load average "
             f"{res['loadavg_start'][0]:.2f} at the start, {res['loadavg_end'][0]:.2f} at the "
             "end. Thesis columns: the thesis's figures (other hardware, 2003, Java ORBs, "
             "two machines on 100 MBit); ours: one machine, loopback.", "",
             "### Scenario 1: latency without filters (A.1-A.3)", "",
             "cells: mean cycle ms / latency min / max / avg ms", "",
             "| S x C | siftbus | OpenFusion (A.1) | OpenORB (A.2) | JacORB (A.3) | "
             "delivered | timeouts |", "|---|---|---|---|---|---:|---:|"]
    for r in res["unfiltered"]:
        t = THESIS_UNFILTERED[(r["suppliers"], r["consumers"])]
        lines.append(
            f"| {r['suppliers']}x{r['consumers']} | {r['cycle_ms']:.0f} / {r['min_ms']:.1f} / "
            f"{r['max_ms']:.1f} / **{r['avg_ms']:.1f}** | "
            + " | ".join(_thesis_cells(t[pr]) for pr in PRODUCTS)
            + f" | {r['deliveries']}/{r['expected_deliveries']} | {r['timeouts']} |")
    lines += ["", "### Scenario 2: latency with one filter per consumer proxy (A.4-A.6)", "",
              "| S x C | siftbus | OpenFusion (A.4) | OpenORB (A.5) | JacORB (A.6) | "
              "delivered |", "|---|---|---|---|---|---:|"]
    for r in res["filtered"]:
        t2 = THESIS_FILTERED[r["consumers"]]
        mx = "-" if r["deliveries"] <= 1 else f"{r['max_ms']:.1f}"
        lines.append(
            f"| {r['suppliers']}x{r['consumers']} | {r['cycle_ms']:.0f} / {r['min_ms']:.1f} / "
            f"{mx} / **{r['avg_ms']:.1f}** | "
            + " | ".join(_thesis_cells(t2[pr]) for pr in PRODUCTS)
            + f" | {r['deliveries']}/{r['expected_deliveries']} |")
    lines += ["", "### Scenario 3: filter evaluation, ms per 100 `match` calls (A.7-A.9)", "",
              "| expression | event | matches | siftbus ms | us/call | OpenFusion | OpenORB | "
              "JacORB |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in res["filter"]:
        t3 = r["thesis_ms"] or {}
        lines.append(f"| {r['expression']} | {r['event']} | {r['matches']} | {r['ms']:.3f} | "
                     f"{r['us_per_call']:.2f} | " + " | ".join(
                         str(t3.get(pr, "")) for pr in PRODUCTS) + " |")
    lines += ["", "### Throughput S -> C (not in the thesis; its 1 -> 1 bursts are in the "
              "default run)", "",
              "| S x C | filter | events | sent ev/s | events/s delivered | deliveries/s | "
              "delivered |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in res["throughput"]:
        lines.append(f"| {r['suppliers']}x{r['consumers']} | {r['filter']} | {r['events']} | "
                     f"{r['sent_per_s']:.0f} | {r['events_per_s']:.0f} | "
                     f"{r['deliveries_per_s']:.0f} | {r['deliveries']}/{r['expected']} |")
    return "\n".join(lines)


def plot(res: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, rows, thesis, title in (
            (axes[0], res["unfiltered"], lambda r: THESIS_UNFILTERED[
                (r["suppliers"], r["consumers"])], "no filters (A.1-A.3)"),
            (axes[1], res["filtered"], lambda r: THESIS_FILTERED[r["consumers"]],
             "one filter per consumer (A.4-A.6)")):
        labels = [f"{r['suppliers']}x{r['consumers']}" for r in rows]
        xs = range(len(rows))
        width = 0.2
        ax.bar([x - 1.5 * width for x in xs], [max(r["avg_ms"], 0.01) for r in rows], width,
               label="siftbus")
        for k, pr in enumerate(PRODUCTS):
            ax.bar([x + (k - 0.5) * width for x in xs], [thesis(r)[pr][3] for r in rows],
                   width, label=f"{pr} (thesis)")
        ax.set_yscale("log")
        ax.set_xticks(list(xs), labels)
        ax.set_xlabel("suppliers x consumers")
        ax.set_ylabel("average latency, ms (log)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "channels_bendt_latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    rows = [r for r in res["filter"] if r["thesis_ms"]]
    xs = range(len(rows))
    width = 0.2
    ax.bar([x - 1.5 * width for x in xs], [r["ms"] for r in rows], width, label="siftbus")
    for k, pr in enumerate(PRODUCTS):
        ax.bar([x + (k - 0.5) * width for x in xs], [r["thesis_ms"][pr] for r in rows], width,
               label=f"{pr} (thesis)")
    ax.set_yscale("log")
    ax.set_xticks(list(xs), [r["expression"] for r in rows])
    ax.set_ylabel("ms per 100 match calls (log)")
    ax.set_title("filter evaluation (A.7-A.9)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "channels_bendt_filters.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    if res["throughput"]:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        cells = sorted({(r["suppliers"], r["consumers"]) for r in res["throughput"]})
        filters = ["none", "all", "share"]
        for k, filt in enumerate(filters):
            vals = [next((r["deliveries_per_s"] for r in res["throughput"]
                          if (r["suppliers"], r["consumers"]) == c and r["filter"] == filt), 0)
                    for c in cells]
            ax.bar([x + (k - 1) * 0.25 for x in range(len(cells))], vals, 0.25,
                   label=f"filter: {filt}")
        ax.set_xticks(range(len(cells)), [f"{s}x{c}" for s, c in cells])
        ax.set_ylabel("deliveries/s")
        ax.set_title("throughput S -> C over loopback (siftbus)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / "channels_bendt_throughput.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def run(quick: bool, out: Path = RESULTS) -> dict[str, Any]:
    """All four scenarios; writes channels_bendt.json and the PNGs under ``out``."""
    import json
    import platform

    events, interval = (10, 0.025) if quick else (100, 0.25)
    res: dict[str, Any] = {"mode": "quick" if quick else "thesis", "python":
                           platform.python_version(), "cpus": os.cpu_count(),
                           "params": {"events": events, "interval_ms": interval * 1000},
                           "loadavg_start": os.getloadavg()}
    t0 = time.perf_counter()
    res["filter"] = filter_times(100, 3 if quick else 9)
    print("  filter times done", file=sys.stderr, flush=True)
    server = Server()
    try:
        res["unfiltered"] = []
        for s in (1, 5, 10):
            for c in (1, 10, 50):
                r = asyncio.run(closed_loop(server.port, s, c, events, interval, False))
                r["loadavg"] = os.getloadavg()
                res["unfiltered"].append(r)
                print(f"  {s}x{c}: avg {r['avg_ms']:.1f} ms", file=sys.stderr, flush=True)
        res["filtered"] = []
        for c in (1, 10, 50):
            r = asyncio.run(closed_loop(server.port, 1, c, events, interval, True))
            r["loadavg"] = os.getloadavg()
            res["filtered"].append(r)
            print(f"  filtered 1x{c}: avg {r['avg_ms']:.1f} ms", file=sys.stderr, flush=True)
        total = 400 if quick else 4000
        res["throughput"] = []
        asyncio.run(throughput(server.port, 1, 1, total // 4, "none"))  # warm-up, not kept
        for s, c in ((1, 1), (1, 10), (10, 1), (10, 10)):
            for filt in ("none", "all", "share"):
                if filt == "share" and c == 1:
                    continue
                runs = [asyncio.run(throughput(server.port, s, c, total, filt))
                        for _ in range(1 if quick else 3)]
                row = {k: (median([x[k] for x in runs]) if isinstance(v, float) else v)
                       for k, v in runs[0].items()}
                row["deliveries"] = min(x["deliveries"] for x in runs)
                row["loadavg"] = os.getloadavg()
                res["throughput"].append(row)
                print(f"  throughput {s}x{c} {filt}: {row['deliveries_per_s']:.0f} "
                      "deliveries/s", file=sys.stderr, flush=True)
    finally:
        server.close()
    res["elapsed_s"] = time.perf_counter() - t0
    res["loadavg_end"] = os.getloadavg()
    out.mkdir(parents=True, exist_ok=True)
    (out / "channels_bendt.json").write_text(json.dumps(res, indent=1) + "\n")
    md = report(res)
    (out / "channels_bendt.md").write_text(md + "\n")
    res["plots"] = [str(p) for p in plot(res, out)]
    return res
