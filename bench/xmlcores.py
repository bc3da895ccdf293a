"""The thesis's benchmarks B2 (events per message) and B3 (number of cores) for the XML filter.

**B2** (the thesis's Test 2, Fig. 40/41): 10 subscriptions, the same 100,000 EPCIS events
(``bench/xmlgen.py``) cut into messages of 1, 10, ..., 100,000 events; events per second
of one process (CPU and wall clock) and of ``ParallelFilter`` with 1 and 2 workers (wall
clock). The thesis found the time per event falling with the message size up to an
optimum and rising after; here a message costs a parser and a generator, so small messages
cost more per event, and past a few hundred events the rate is flat (the splitter keeps
memory bounded, so nothing grows with the message).

**B3** (cores): at 100, 1,000, 10,000 and 183,275 subscriptions (the sparse workload),
events per second (wall clock) of one process and of 1 and 2 worker processes
(``siftbus.xmlfilter.parallel``), with the parent's CPU seconds per event ``p`` (handing out
messages, receiving notifications) and the workers' ``w`` (everything else), measured in
the same runs. The model for ``n`` workers on ``n + 1`` free cores is
``min(n / w, 1 / p)`` events per second; it is printed for 1 to 16 workers.

The machine is shared (2 vCPUs, other jobs): every figure is a median of ``--repeat`` runs
and the load average is recorded at the start and the end.

    python bench/xmlcores.py            # B2 and B3
    python bench/xmlcores.py --quick    # fewer events
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).parent))

import xmlgen
from siftbus.xmlfilter import XmlEventFilter
from siftbus.xmlfilter.parallel import ParallelFilter

RESULTS = Path(__file__).parent / "results" / "xmlcores.json"


def one_process(f: XmlEventFilter, messages: list[bytes]) -> tuple[float, float, int]:
    """(events/s CPU, events/s wall, events) of matching in this process."""
    n = 0
    w = time.perf_counter()
    t = time.process_time()
    for m in messages:
        for _ in f.iter_results(m):
            n += 1
    return n / (time.process_time() - t), n / (time.perf_counter() - w), n


def workers_run(pf: ParallelFilter, messages: list[bytes]) -> dict[str, float]:
    """Wall-clock events/s of the workers, and CPU seconds per event of parent and workers."""
    kids = [psutil.Process(p.pid) for p in pf._procs]
    before = [sum(k.cpu_times()[:2]) for k in kids]
    n = 0
    w = time.perf_counter()
    t = time.process_time()
    for events, _ in pf.publish_many(messages):
        n += events
    wall = time.perf_counter() - w
    parent = time.process_time() - t
    work = sum(sum(k.cpu_times()[:2]) - b for k, b in zip(kids, before, strict=True))
    return {"events_per_s": n / wall, "parent_cpu_per_event": parent / n,
            "worker_cpu_per_event": work / n}


def b2(total: int, repeat: int) -> list[dict[str, Any]]:
    f = XmlEventFilter()
    for s in xmlgen.subscriptions(10):
        f.subscribe(s)
    rows = []
    for per in (1, 10, 100, 1000, 10_000, 100_000):
        count = min(total, max(per, total if per >= 100 else total // 10))
        msgs = list(xmlgen.epcis_messages(count, per_message=per))
        cpu, wall = [], []
        for _ in range(repeat):
            c, w_, _ = one_process(f, msgs)
            cpu.append(c)
            wall.append(w_)
        row: dict[str, Any] = {"events_per_message": per, "events": count,
                               "one_process_cpu": round(statistics.median(cpu)),
                               "one_process_wall": round(statistics.median(wall))}
        for workers in (1, 2):
            with ParallelFilter(f, workers) as pf:
                runs = [workers_run(pf, msgs) for _ in range(repeat)]
            row[f"workers_{workers}_wall"] = round(statistics.median(
                r["events_per_s"] for r in runs))
        rows.append(row)
        print(f"B2 {row}", file=sys.stderr, flush=True)
    return rows


def b3(sizes: list[int], events: int, repeat: int) -> list[dict[str, Any]]:
    subs = xmlgen.subscriptions(max(sizes))
    msgs = list(xmlgen.epcis_messages(events, per_message=1000))
    rows = []
    f = XmlEventFilter()
    done = 0
    for n in sorted(sizes):
        for s in subs[done:n]:
            f.subscribe(s)
        done = n
        f.matcher.compile()
        gc.collect()
        gc.freeze()
        cpu, wall = [], []
        for _ in range(repeat):
            c, w_, _ = one_process(f, msgs)
            cpu.append(c)
            wall.append(w_)
        row: dict[str, Any] = {"subscriptions": n,
                               "one_process_cpu": round(statistics.median(cpu)),
                               "one_process_wall": round(statistics.median(wall))}
        for workers in (1, 2):
            with ParallelFilter(f, workers) as pf:
                list(pf.publish_many(msgs[:1]))  # warm
                runs = [workers_run(pf, msgs) for _ in range(repeat)]
            row[f"workers_{workers}_wall"] = round(statistics.median(
                r["events_per_s"] for r in runs))
            row[f"workers_{workers}_parent_us"] = round(statistics.median(
                r["parent_cpu_per_event"] for r in runs) * 1e6, 2)
            row[f"workers_{workers}_worker_us"] = round(statistics.median(
                r["worker_cpu_per_event"] for r in runs) * 1e6, 2)
        p = row["workers_2_parent_us"] / 1e6
        w = row["workers_2_worker_us"] / 1e6
        row["model"] = {k: round(min(k / w, 1 / p)) for k in (1, 2, 4, 8, 16)}
        gc.unfreeze()
        rows.append(row)
        print(f"B3 {row}", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                    default=[100, 1000, 10_000, 183_275])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    total = 20_000 if args.quick else 100_000
    events = 10_000 if args.quick else 20_000
    load_start = os.getloadavg()
    b2_rows = b2(total, args.repeat)
    b3_rows = b3(args.sizes, events, args.repeat)
    load_end = os.getloadavg()

    print("B2: events/s by events per message (10 subscriptions)\n")
    print("| events/message | events | 1 process (CPU) | 1 process (wall) | 1 worker (wall) "
          "| 2 workers (wall) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in b2_rows:
        print(f"| {r['events_per_message']:,} | {r['events']:,} | {r['one_process_cpu']:,} | "
              f"{r['one_process_wall']:,} | {r['workers_1_wall']:,} | "
              f"{r['workers_2_wall']:,} |")
    print("\nB3: events/s by worker processes (wall clock), messages of 1,000 events\n")
    print("| subscriptions | 1 process (CPU) | 1 process (wall) | 1 worker | 2 workers | "
          "parent µs/event | worker µs/event | model 4 / 8 / 16 workers |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in b3_rows:
        m = r["model"]
        print(f"| {r['subscriptions']:,} | {r['one_process_cpu']:,} | "
              f"{r['one_process_wall']:,} | {r['workers_1_wall']:,} | "
              f"{r['workers_2_wall']:,} | {r['workers_2_parent_us']} | "
              f"{r['workers_2_worker_us']} | {m[4]:,} / {m[8]:,} / {m[16]:,} |")
    print(f"\nload average {load_start} at start, {load_end} at end; {os.cpu_count()} CPUs")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "xmlcores", "b2": b2_rows, "b3": b3_rows,
        "loadavg_start": load_start, "loadavg": load_end, "cpus": os.cpu_count(),
        "python": platform.python_version(), "repeat": args.repeat,
        "note": "shared 2-core machine with other jobs running: wall-clock figures move "
                "with the load",
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
