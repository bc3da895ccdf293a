"""Bittner's experiments E1-E6 (thesis ch. 6) side by side with the thesis: where the
saturation throughput f_sat agrees with his and where, and why, it does not.

Bittner measured one event per message on 1 GHz PCs: every event costs each broker a
receive, a decode and a filtering. bench/network.py publishes in batches of 500 and found
profile forwarding (PW) at 0.73-0.94x event flooding (EW) where the thesis has PW ahead.
This script runs each experiment's setup (scaled down: profiles per broker, events) in
the simulator with **both** message sizes, one event per message (``batch 1``, his
setting) and 500, and splits each broker's CPU into the matcher's share (per-profile
routing) and the rest (per-frame work: decode, route bookkeeping, encode). It then runs
E1, E2 and E5 on loopback broker processes (one process per broker, CPU from /proc), one
event per frame.

Setups (thesis §6.3-6.8; report §3.4), one int attribute, equality profiles, sigma
identical copies of each subscribed value within a broker, one publisher and one
subscriber per broker, events uniform over publishers:

E1  4 brokers in a line, RN B1; p^e in {0, 0.5, 1} and p^p in {0, 1} at sigma 1 and 9
E2  hub tree (B1 the hub, Bittner's V2), 1/3/5/9 brokers, profiles total fixed, p^p 0.1/0.7
E3  hub of 5, sigma 1/5/10 at p^e 0.1 and at p^p 0.7 (p^e = p^p / sigma)
E4  hub of 5, 1/3/5 types (type i's RN at Bi), p^p 0.1
E5  4 in a line, locality 0/0.5/1 at p^e 0.5
E6  4 in a line, p^e 0.8, profiles per broker growing: f_sat and the fullest table

    python bench/bittner.py --quick --skip-loopback   # 14 settings, 1 repeat: 1-4 minutes
    python bench/bittner.py              # 30 settings, medians of 3, loopback: 5-20 minutes
                                         # (2 shared cores; the longer under load)

Writes bench/results/bittner.json, bittner.md and bittner_e*.png.
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
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from network import (  # noqa: E402
    PROTOCOLS,
    UNSUBSCRIBED_FROM,
    bittner_schema,
    bytes_per_entry,
    free_port,
    hub,
    line,
    process_cpu,
    publish_workload,
    subscribe_workload,
)
from siftbus.model import Event, IntervalSet, Profile  # noqa: E402

RESULTS = HERE / "results"

# The thesis's f_sat (events/s) where the text states them: (PW, EW, RK); None = not given.
THESIS: dict[tuple[str, str], tuple[float | None, float | None, float | None]] = {
    ("E1", "pe=0"): (71_000, 12_000, 14_200),
    ("E1", "pe=1 s=1"): (13_000, 10_000, 8_800),
    ("E1", "pe=1 s=9"): (3_000, 4_300, 3_100),
    ("E1", "pp=0"): (72_000, 12_500, 15_500),
    ("E1", "pp=1 s=1"): (11_000, 9_350, 8_300),
    ("E1", "pp=1 s=9"): (30_000, 10_800, 12_000),
    ("E2", "n=1 pp=0.1"): (20_000, 19_000, None),
    ("E2", "n=9 pp=0.1"): (65_000, 8_500, 16_000),
    ("E2", "n=1 pp=0.7"): (None, 10_000, 10_000),
    ("E2", "n=9 pp=0.7"): (None, 8_500, 10_000),
    ("E3", "s=1 pe=0.1"): (44_500, 12_000, 13_700),
    ("E3", "s=10 pp=0.1"): (66_500, 11_000, 15_000),
    ("E3", "s=1 pp=0.7"): (15_200, 11_000, 9_600),
    ("E4", "types=1 pp=0.1"): (25_000, 3_750, 4_500),
    ("E4", "types=5 pp=0.1"): (25_000, 3_750, 4_500),
    ("E5", "loc=0"): (10_000, None, None),
    ("E5", "loc=1"): (35_000, None, None),
    ("E6", "plateau"): (12_500, 9_500, 8_500),
}
THESIS_TRENDS = {
    "E1": "PW far ahead as p^e -> 0 (71,000 vs 12,000); all converge at p^e = 1; at "
          "sigma 9 and p^e 1 EW is best (4,300 vs 3,000)",
    "E2": "PW rises with brokers (20,000 -> 65,000 at p^p 0.1); EW falls (19,000 -> 8,500); "
          "RK flat (10,000-16,000); PW duplication grows linearly",
    "E3": "at constant p^e all fall with sigma; at constant p^p PW and RK rise, EW flat",
    "E4": "PW about constant (25,000), EW about 3,750, RK 4,500-6,000 (best at 3 types)",
    "E5": "PW rises 2-3.5x with locality, EW unchanged, RK at most 1.25x",
    "E6": "plateau PW 12,500 > EW 9,500 > RK 8,500; PW and RK collapse (paging) at about "
          "100,000 profiles, EW at about 350,000",
}


# ---------------------------------------------------------------------------------------
# the simulator


def sim_run(*, brokers: int, edges: list[tuple[str, str]], protocol: str, ppb: int,
            sigma: int = 1, pe: float = 0.1, locality: float | None = None, types: int = 1,
            events: int = 2000, batch: int = 1, repeats: int = 1,
            rn: dict[str, str] | None = None, seed: int = 7) -> dict[str, Any]:
    """One setting: f_sat = events / the busiest broker's CPU, and that broker's split."""
    w = subscribe_workload(brokers=brokers, edges=edges, protocol=protocol, ppb=ppb,
                           sigma=sigma, types=types, rn=rn, seed=seed)
    sim, names, subscribed = w.sim, w.names, w.subscribed
    sim.run()
    tables = sim.table_sizes()
    evs, expected, per = publish_workload(w, events=events, pe=pe, locality=locality,
                                          types=types, sigma=sigma)
    n_events = per * brokers
    match_cpu: dict[str, float] = defaultdict(float)
    for b, node in sim.nodes.items():
        bm = node.routing.batch_match
        inner = bm.match

        def timed(block: Any, inner: Any = inner, b: str = b) -> Any:
            t = time.process_time()
            r = inner(block)
            match_cpu[b] += time.process_time() - t
            return r

        bm.match = timed  # type: ignore[method-assign]
    fsats, shares, frame_us = [], [], []
    gc.collect()
    gc.disable()
    before = sim.stats()
    try:
        for _ in range(repeats):
            sim.clear_deliveries()
            sim.busy.clear()
            match_cpu.clear()
            m0 = {b: s.messages_in for b, s in sim.stats().items()}
            for b in names:
                for i in range(0, per, batch):
                    sim.publish(f"p{b}", evs[b][i:i + batch])
            sim.run()
            got = len(sim.deliveries())
            if got != expected:
                raise AssertionError(f"{protocol}: {got} notifications, expected {expected}")
            busiest = max(names, key=lambda x: sim.busy[x])
            busy = sim.busy[busiest]
            fsats.append(n_events / busy if busy > 0 else float("inf"))
            shares.append(match_cpu[busiest] / busy if busy > 0 else 0.0)
            frames = sim.stats()[busiest].messages_in - m0[busiest]
            frame_us.append((busy - match_cpu[busiest]) / frames * 1e6 if frames else 0.0)
    finally:
        gc.enable()
    after = sim.stats()
    d = {k: sum(getattr(after[b], k) - getattr(before[b], k) for b in names) / repeats
         for k in ("bytes_in", "messages_in", "filter_ops")}
    return {"protocol": protocol, "brokers": brokers, "profiles": subscribed,
            "sigma": sigma, "pe": pe, "pp": pe * sigma, "locality": locality,
            "types": types, "batch": batch, "events": n_events,
            "fsat": statistics.median(fsats), "fsat_runs": fsats,
            "match_share": statistics.median(shares),
            "non_match_us_per_frame": statistics.median(frame_us),
            "bytes_per_event": d["bytes_in"] / n_events,
            "filter_ops_per_event": d["filter_ops"] / n_events,
            "duplication": sum(tables.values()) / subscribed,
            "max_table": max(tables.values())}


QUICK = {("E1", "pe=0 s=1"), ("E1", "pe=1 s=1"), ("E1", "pe=1 s=9"), ("E1", "pp=1 s=9"),
         ("E2", "n=1 pp=0.1"), ("E2", "n=9 pp=0.1"), ("E3", "s=1 pe=0.1"),
         ("E3", "s=10 pp=0.7"), ("E4", "types=1 pp=0.1"), ("E4", "types=5 pp=0.1"),
         ("E5", "loc=0"), ("E5", "loc=1"), ("E6", "ppb=75"), ("E6", "ppb=1200")}
"""The settings a ``--quick`` run keeps."""

BATCHED = 100
"""Events per frame of the batched runs (bench/network.py publishes 500)."""


def settings(size: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(experiment, label, sim_run arguments) of every setting."""
    ppb = {"quick": 300, "default": 300, "full": 2000}[size]
    out: list[tuple[str, str, dict[str, Any]]] = []
    l4 = {"brokers": 4, "edges": line(4)}
    for s in (1, 9):
        for pe in (0.0, 0.5, 1.0):
            out.append(("E1", f"pe={pe:g} s={s}", {**l4, "ppb": ppb, "sigma": s, "pe": pe}))
        out.append(("E1", f"pp=1 s={s}", {**l4, "ppb": ppb, "sigma": s, "pe": 1.0 / s}))
    for n in (1, 3, 5, 9):
        for pp in (0.1, 0.7):
            out.append(("E2", f"n={n} pp={pp:g}", {"brokers": n, "edges": hub(n),
                                                    "ppb": 4 * ppb // n, "pe": pp}))
    h5 = {"brokers": 5, "edges": hub(5)}
    for s in (1, 5, 10):
        out.append(("E3", f"s={s} pe=0.1", {**h5, "ppb": ppb, "sigma": s, "pe": 0.1}))
        out.append(("E3", f"s={s} pp=0.7", {**h5, "ppb": ppb, "sigma": s, "pe": 0.7 / s}))
    for t in (1, 3, 5):
        out.append(("E4", f"types={t} pp=0.1", {**h5, "ppb": ppb, "types": t, "pe": 0.1,
                                                 "rn": {f"T{i}": f"B{i}" for i in range(t)}}))
    for loc in (0.0, 0.5, 1.0):
        out.append(("E5", f"loc={loc:g}", {**l4, "ppb": ppb, "pe": 0.5, "locality": loc}))
    for k in (1, 4, 16):
        out.append(("E6", f"ppb={ppb * k // 4}", {**l4, "ppb": ppb * k // 4, "pe": 0.8}))
    return [x for x in out if size != "quick" or (x[0], x[1]) in QUICK]


def simulate(size: str) -> list[dict[str, Any]]:
    events = {"quick": 800, "default": 1200, "full": 8000}[size]
    repeats = 1 if size == "quick" else 3
    rows = []
    for exp, label, kw in settings(size):
        for batch in (1, BATCHED):
            for p in PROTOCOLS:
                # batched frames cost little per event: more events, so the busiest
                # broker's CPU time is well above the timer's noise
                r = sim_run(protocol=p, events=events * (1 if batch == 1 else 10),
                            batch=batch, repeats=repeats, **kw)
                r.update(experiment=exp, setting=label)
                rows.append(r)
        print(f"  {exp} {label}: " + ", ".join(
            f"{r['protocol']}/{r['batch']} {r['fsat']:.0f}" for r in rows[-6:]),
            file=sys.stderr, flush=True)
    return rows


# ---------------------------------------------------------------------------------------
# loopback broker processes


def start(tmp: Path, protocol: str, n: int, edges: list[tuple[str, str]],
          rn: str) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    strategy = PROTOCOLS[protocol][1]
    proto = PROTOCOLS[protocol][0]
    (tmp / "schema.toml").write_text('[T0]\nv = "int[0,99999]"\n')
    ports = [free_port() for _ in range(n)]
    text = (f'[network]\nschema = "schema.toml"\nprotocol = "{proto}"\n'
            f'strategy = "{strategy}"\n[network.rendezvous]\nT0 = "{rn}"\n')
    for i, port in enumerate(ports):
        nb = [a if b == f"B{i}" else b for a, b in edges if f"B{i}" in (a, b)]
        text += f"[brokers.B{i}]\nport = {port}\nneighbours = {json.dumps(nb)}\n"
    cfg = tmp / f"net-{protocol}-{n}.toml"
    cfg.write_text(text)
    procs = []
    for i in range(n):
        p = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "-c", str(cfg), "-n",
                              f"B{i}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert p.stdout is not None
        p.stdout.readline()
        procs.append(p)
    return procs, ports


async def _loopback(ports: list[int], protocol: str, ppb: int, pe: float,
                    locality: float | None, events: int, procs: list[Any],
                    seed: int = 7) -> dict[str, Any]:
    from siftbus.client import Client

    rnd = random.Random(seed)
    schema = bittner_schema(1)
    n = len(ports)
    pool = rnd.sample(range(UNSUBSCRIBED_FROM), ppb * n)
    values = [pool[i * ppb:(i + 1) * ppb] for i in range(n)]
    got = [0] * n
    subs = []
    for i, port in enumerate(ports):
        c = await Client.connect(port=port, name=f"s{i}")

        def on_batch(batch: Any, i: int = i) -> None:
            got[i] += len(batch)

        await c.subscribe_many([Profile.from_constraints(f"v{v}", schema["T0"], {
            "v": IntervalSet.points([v])}) for v in values[i]], batch_callback=on_batch)
        subs.append(c)
    pubs = [await Client.connect(port=p, name=f"p{i}") for i, p in enumerate(ports)]
    # wait until the tables stop changing (the profiles have spread)
    prev: list[int] = []
    for _ in range(300):
        sizes = [(await c.stats())["table_size"] for c in subs]
        if sizes == prev:
            break
        prev = sizes
        await asyncio.sleep(0.2)
    per = events // n
    every = [v for vs in values for v in vs]
    evs = []
    expected = 0
    for i in range(n):
        others = [v for j in range(n) if j != i for v in values[j]] or values[i]
        out = []
        for _ in range(per):
            if rnd.random() < pe:
                src = (values[i] if locality is not None and rnd.random() < locality
                       else others if locality is not None else every)
                out.append(Event(schema["T0"], (rnd.choice(src),)))
                expected += 1
            else:
                out.append(Event(schema["T0"], (rnd.randrange(UNSUBSCRIBED_FROM, 100_000),)))
        evs.append(out)
    for i in range(n):  # warm-up, not measured
        await pubs[i].publish_batch(evs[i][:20], ack=True)
    end = time.monotonic() + 30
    warm = sum(1 for i in range(n) for e in evs[i][:20] if e.keys[0] < UNSUBSCRIBED_FROM)
    while sum(got) < warm and time.monotonic() < end:
        await asyncio.sleep(0.05)
    base = sum(got)
    cpu0 = [process_cpu(p.pid) or 0.0 for p in procs]

    async def publish(i: int) -> None:
        for k, e in enumerate(evs[i][20:]):
            # one event per frame, as Bittner's brokers received them
            await pubs[i].publish_batch([e], ack=k % 200 == 199)
        await pubs[i].ping()

    t0 = time.perf_counter()
    await asyncio.gather(*(publish(i) for i in range(n)))
    want = expected - warm
    end = time.monotonic() + 120
    while sum(got) - base < want and time.monotonic() < end:
        await asyncio.sleep(0.02)
    wall = time.perf_counter() - t0
    cpu = [(process_cpu(p.pid) or 0.0) - a for p, a in zip(procs, cpu0, strict=True)]
    for c in subs + pubs:
        await c.close()
    if sum(got) - base != want:
        raise AssertionError(f"{protocol}: {sum(got) - base} notifications, expected {want}")
    measured = sum(len(x) - 20 for x in evs)
    return {"protocol": protocol, "brokers": n, "ppb": ppb, "pe": pe, "locality": locality,
            "events": measured, "fsat_cpu": measured / max(cpu) if max(cpu) > 0 else 0.0,
            "events_per_s_wall": measured / wall, "broker_cpu_s": cpu,
            "loadavg": os.getloadavg()}


def loopback(size: str) -> list[dict[str, Any]]:
    ppb = {"quick": 300, "default": 300, "full": 2000}[size]
    events = {"quick": 2000, "default": 4000, "full": 20000}[size]
    plan: list[tuple[str, str, int, list[tuple[str, str]], dict[str, Any]]] = []
    for pe in (0, 1):
        plan.append(("E1", f"pe={pe} s=1", 4, line(4), {"pe": float(pe), "locality": None}))
    for n in (1, 5):
        plan.append(("E2", f"n={n} pp=0.1", n, hub(n), {"pe": 0.1, "locality": None}))
    for loc in (0, 1):
        plan.append(("E5", f"loc={loc}", 4, line(4), {"pe": 0.5, "locality": float(loc)}))
    rows = []
    for exp, label, n, edges, kw in plan:
        for p in PROTOCOLS:
            with tempfile.TemporaryDirectory() as d:
                procs, ports = start(Path(d), p, n, edges, f"B{min(1, n - 1)}")
                try:
                    time.sleep(0.5 + 0.2 * n)  # the links come up
                    r = asyncio.run(_loopback(ports, p, 4 * ppb // n if exp == "E2" else ppb,
                                              kw["pe"], kw["locality"], events, procs))
                finally:
                    for pr in procs:
                        pr.terminate()
                    for pr in procs:
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            pr.wait(10)
            r.update(experiment=exp, setting=label)
            rows.append(r)
            print(f"  loopback {exp} {label} {p}: {r['fsat_cpu']:.0f} events/CPU-s "
                  f"(busiest broker)", file=sys.stderr, flush=True)
    return rows


# ---------------------------------------------------------------------------------------
# the report


def _by(rows: list[dict[str, Any]], exp: str, label: str, batch: int | None = None
        ) -> dict[str, dict[str, Any]]:
    return {r["protocol"]: r for r in rows if r["experiment"] == exp and r["setting"] == label
            and (batch is None or r.get("batch") == batch)}


def _thesis_key(exp: str, label: str) -> tuple[str, str] | None:
    for key in ((exp, label), (exp, label.replace(" s=1", "")),
                (exp, label.replace(" s=1", "").replace("pe=0", "pe=0"))):
        if key in THESIS:
            return key
    if exp == "E6":
        return ("E6", "plateau")
    return None


def _winner(f: dict[str, float | None]) -> str:
    known = {k: v for k, v in f.items() if v is not None}
    return max(known, key=lambda k: known[k]) if len(known) >= 2 else "-"


def report(res: dict[str, Any]) -> str:
    sim = res["simulator"]
    lines = ["## Bittner's E1-E6: the thesis beside siftbus", "",
             f"mode {res['mode']}; python {res['python']}, {res['cpus']} CPUs (shared); load "
             f"average {res['loadavg_start'][0]:.2f} at the start, {res['loadavg_end'][0]:.2f} "
             "at the end. Thesis: events/s on 1 GHz PCs, 50,000 profiles per broker (2003); "
             "ours: events per CPU-second of the busiest broker, profiles scaled down "
             f"({res['ppb']} per broker). Compare who wins and the trends, not values.", "",
             "f_sat columns: PW / EW / RK; PW/EW = profile forwarding over flooding; "
             "match % = the matcher's share of the busiest broker's CPU, PW and EW (the "
             "rest is per-frame work: decode, bookkeeping, encode).", "",
             "| exp | setting | thesis PW / EW / RK | PW/EW thesis | sim, 1 event per frame: "
             f"f_sat | PW/EW | match % | sim, {BATCHED} per frame: f_sat | PW/EW | match % | "
             f"winner thesis / 1 / {BATCHED} |",
             "|---|---|---|---:|---|---:|---|---|---:|---|---|"]
    labels: list[tuple[str, str]] = []
    for r in sim:
        key = (r["experiment"], r["setting"])
        if key not in labels:
            labels.append(key)
    for exp, label in labels:
        one, many = _by(sim, exp, label, 1), _by(sim, exp, label, BATCHED)
        tk = _thesis_key(exp, label)
        th = THESIS.get(tk) if tk else None
        th_txt = " / ".join("-" if v is None else f"{v:,.0f}" for v in th) if th else ""
        th_ratio = (f"{th[0] / th[1]:.2f}" if th and th[0] and th[1] else "")
        th_win = _winner(dict(zip(("PW", "EW", "RK"), th, strict=True))) if th else "-"

        def f3(rows: dict[str, dict[str, Any]]) -> str:
            return " / ".join(f"{rows[p]['fsat']:,.0f}" for p in ("PW", "EW", "RK"))

        def ratio(rows: dict[str, dict[str, Any]]) -> str:
            return f"{rows['PW']['fsat'] / rows['EW']['fsat']:.2f}"

        w1 = _winner({p: one[p]["fsat"] for p in one})
        w500 = _winner({p: many[p]["fsat"] for p in many})
        lines.append(
            f"| {exp} | {label} | {th_txt} | {th_ratio} | {f3(one)} | **{ratio(one)}** | "
            f"{100 * one['PW']['match_share']:.0f}, {100 * one['EW']['match_share']:.0f} | "
            f"{f3(many)} | **{ratio(many)}** | {100 * many['PW']['match_share']:.0f}, "
            f"{100 * many['EW']['match_share']:.0f} | {th_win} / {w1} / {w500} |")
    lines += ["", "Traffic and memory (simulator, 1 event per frame): bytes between brokers "
              "per event and profile duplication, PW / EW / RK", "",
              "| exp | setting | bytes/event | duplication | fullest table |",
              "|---|---|---|---|---|"]
    for exp, label in labels:
        one = _by(sim, exp, label, 1)
        lines.append(f"| {exp} | {label} | " + " / ".join(
            f"{one[p]['bytes_per_event']:.0f}" for p in ("PW", "EW", "RK")) + " | " +
            " / ".join(f"{one[p]['duplication']:.2f}" for p in ("PW", "EW", "RK")) + " | " +
            " / ".join(f"{one[p]['max_table']}" for p in ("PW", "EW", "RK")) + " |")
    if res.get("loopback"):
        lines += ["", "Loopback broker processes (one per broker), one event per frame, "
                  "events per CPU-second of the busiest broker (and wall events/s):", "",
                  "| exp | setting | PW | EW | RK | PW/EW |", "|---|---|---|---|---|---:|"]
        seen: list[tuple[str, str]] = []
        for r in res["loopback"]:
            if (r["experiment"], r["setting"]) not in seen:
                seen.append((r["experiment"], r["setting"]))
        for exp, label in seen:
            rows = _by(res["loopback"], exp, label)
            lines.append(f"| {exp} | {label} | " + " | ".join(
                f"{rows[p]['fsat_cpu']:,.0f} ({rows[p]['events_per_s_wall']:,.0f})"
                for p in ("PW", "EW", "RK")) +
                f" | {rows['PW']['fsat_cpu'] / rows['EW']['fsat_cpu']:.2f} |")
    lines += ["", "Thesis trends:", ""] + [f"* {k}: {v}" for k, v in THESIS_TRENDS.items()]
    return "\n".join(lines)


def plot(res: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    sim = res["simulator"]
    for exp in ("E1", "E2", "E3", "E4", "E5", "E6"):
        labels = list(dict.fromkeys(r["setting"] for r in sim if r["experiment"] == exp))
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=False)
        for ax, batch in zip(axes, (1, BATCHED), strict=True):
            for p, style in (("PW", "o-"), ("EW", "s-"), ("RK", "^-")):
                ys = [_by(sim, exp, lab, batch)[p]["fsat"] for lab in labels]
                ax.plot(range(len(labels)), ys, style, label=p)
            ax.set_xticks(range(len(labels)), labels, rotation=30, fontsize=7)
            ax.set_yscale("log")
            ax.set_title(f"{exp}: {'one event' if batch == 1 else f'{BATCHED} events'} "
                         "per frame")
            ax.set_ylabel("f_sat, events per busiest-broker CPU-s")
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / f"bittner_{exp.lower()}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(str(path))
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--full", action="store_true")
    ap.add_argument("--skip-loopback", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    size = "quick" if a.quick else "full" if a.full else "default"
    res: dict[str, Any] = {"mode": size, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
                           "ppb": {"quick": 300, "default": 300, "full": 2000}[size],
                           "bytes_per_table_entry": bytes_per_entry()}
    t0 = time.perf_counter()
    res["simulator"] = simulate(size)
    res["loadavg_simulator"] = os.getloadavg()
    res["loopback"] = [] if a.skip_loopback else loopback(size)
    res["loadavg_end"] = os.getloadavg()
    res["elapsed_s"] = time.perf_counter() - t0
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "bittner.json").write_text(json.dumps(res, indent=1) + "\n")
    md = report(res)
    (a.out / "bittner.md").write_text(md + "\n")
    res["plots"] = plot(res, a.out)
    print(md)
    print(f"\n(wrote {a.out}/bittner.json, bittner.md, {len(res['plots'])} plots; "
          f"{res['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
