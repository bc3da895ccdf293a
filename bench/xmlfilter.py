"""Benchmark of the XML event filter against per-subscription lxml XPath (same run).

Workloads (``bench/xmlgen.py``; each has the thesis's three fixed subscriptions, then
random ones, one in ten with two filters):

* **sparse**: the thesis-like EPCIS scenario, one selective condition (a read point, a
  business location, an EPC class, a group of read points) and up to two broad ones; the
  automotive scenario is 183,275 of them;
* **dense**: one to three broad conditions from small pools (business step sets, actions,
  disposition sets, temperature thresholds, a plant's read points): hundreds of matches
  per event at 10,000;
* **equality**: ``string-equals`` only;
* **range**: EPC serial ranges ``[lo-hi]`` of three suppliers' parts (the interval index)
  and temperature windows with decimal bounds.

For each (workload, N) it measures, on one thread:

* **loading**: the subscriptions as XML documents of 10,000 (``to_xml``), registered with
  ``XmlEventFilter.subscribe_xml`` (parsing, XSD validation, compiling, indexing):
  subscriptions per CPU second; then the first match's compiling of the access table;
* **engine**: events per CPU second of ``XmlEventFilter.iter_results`` over messages of
  1,000 ObjectEvents (parsing, cutting, matching and serialising notifications included),
  median of ``--repeat`` runs; the wall-clock rate of the same runs beside it (on a shared
  machine wall time mostly measures the neighbours);
* **baseline**: events per CPU second of evaluating every subscription on its own with
  one compiled lxml XPath per content filter (``XPathReference(mode="xpath")``). Its cost
  is linear in N (nothing is shared), so above ``--baseline-direct`` it is measured on a
  random sample of ``--baseline-sample`` subscriptions and scaled by N / sample;
* **check**: on a 50-event message the engine's matches restricted to a check set (the
  sample plus every subscription the engine reports for that message) must equal the
  XPath oracle's exactly, or the benchmark fails.

Ablations at N = min(largest sparse, 100,000), fresh engines measured in turns (one run of
each per round): the default, pre-check off, the literal counting strategy, no
serialisation. The load average is recorded at the start and the end, and a fixed Python
loop is timed as a calibration.

    python bench/xmlfilter.py --quick      # sparse up to 100,000, the others at 10,000
    python bench/xmlfilter.py              # adds 183,275 (the automotive scenario)
    python bench/xmlfilter.py --full       # adds 200,000, more repeats

The previous engine as a same-run baseline: its ``src`` unpacked apart and put first on
the path, the two run in turns (the XPath oracle and this workload generator stay)::

    git archive main src | tar -x -C /tmp/prev
    PYTHONPATH=/tmp/prev/src python bench/xmlfilter.py --sizes 183275,200000 \
        --no-ablations --out /tmp/prev.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).parent))

import xmlgen
from siftbus.xmlfilter import Subscription, XmlEventFilter, XPathReference, to_xml

RESULTS = Path(__file__).parent / "results" / "xmlfilter.json"
#: CPU time of this process: on a shared machine wall time mostly measures the neighbours
CLOCK = time.process_time
DOC_SIZE = 10_000


def calibrate() -> float:
    """CPU seconds for a fixed pure-Python loop (about 0.2-0.3 s on a modern core)."""
    t = CLOCK()
    s = 0
    for i in range(3_000_000):
        s += i
    return CLOCK() - t


def load(f: XmlEventFilter, subs: list[Subscription]) -> float:
    """Register ``subs`` as documents of ``DOC_SIZE``, as a subscription file is loaded at
    start-up (``freeze``); CPU seconds of ``subscribe_xml``."""
    spent = 0.0
    for i in range(0, len(subs), DOC_SIZE):
        doc = to_xml(subs[i : i + DOC_SIZE], {"ext": xmlgen.EXT_NS})
        t = CLOCK()
        f.subscribe_xml(doc, default_method="HTTP", sender="http://localhost/",
                        freeze=True)
        spent += CLOCK() - t
    return spent


def engine_rate(f: XmlEventFilter, messages: list[bytes], repeat: int
                ) -> tuple[float, float, int]:
    """(CPU-time events/s, wall-clock events/s, matches), medians over ``repeat`` runs."""
    rates, walls = [], []
    matches = 0
    for _ in range(repeat):
        n = 0
        matches = 0
        w = time.perf_counter()
        t = CLOCK()
        for m in messages:
            for r in f.iter_results(m):
                n += 1
                matches += len(r.match.subscriptions)
        rates.append(n / (CLOCK() - t))
        walls.append(n / (time.perf_counter() - w))
    return statistics.median(rates), statistics.median(walls), matches


def baseline_rate(subs: list[Subscription], message: bytes, events: int, repeat: int
                  ) -> float:
    """Events per CPU second of per-subscription XPath on ``subs``."""
    ref = XPathReference(subs, mode="xpath")
    rates = []
    for _ in range(repeat):
        t = CLOCK()
        ref.count_matches(message)
        rates.append(events / (CLOCK() - t))
    return statistics.median(rates)


def check(f: XmlEventFilter, sample: list[Subscription], message: bytes) -> int:
    """Engine matches restricted to ``sample`` == the XPath oracle's; returns the count."""
    ids = {s.id for s in sample}
    got = [tuple(x for x in r.match.subscriptions if x in ids) for r in f.iter_results(message)]
    want = [e.subscriptions for e in XPathReference(sample, mode="xpath").evaluate(message)]
    if got != want:
        raise SystemExit(f"benchmark check FAILED: engine and XPath oracle disagree "
                         f"({sum(map(len, got))} vs {sum(map(len, want))} matches)")
    return sum(map(len, got))


def measure(workload: str, sizes: list[int], events: int, repeat: int,
            args: argparse.Namespace) -> list[dict[str, Any]]:
    """One workload's rows, its sizes measured on one engine grown step by step."""
    all_subs = xmlgen.subscriptions(max(sizes), workload=workload)
    messages = list(xmlgen.epcis_messages(events, per_message=1000, workload=workload))
    sample_msg = next(xmlgen.epcis_messages(50, per_message=50, seed=7, workload=workload))
    base_msg = next(xmlgen.epcis_messages(20, per_message=20, seed=9, workload=workload))
    rnd = random.Random(5)
    by_id = {s.id: s for s in all_subs}
    rows: list[dict[str, Any]] = []
    f = XmlEventFilter()
    registered = 0
    for n in sorted(sizes):
        gc.unfreeze()
        load_s = load(f, all_subs[registered:n])
        loaded = n - registered
        registered = n
        t = CLOCK()
        f.matcher.compile()  # what the first match after loading does
        compile_s = CLOCK() - t
        gc.collect()
        gc.freeze()  # the index is long-lived: keep the cyclic GC from rescanning it
        rate, wall, matches = engine_rate(f, messages, repeat)
        sample = (all_subs[:n] if n <= args.baseline_sample
                  else rnd.sample(all_subs[:n], args.baseline_sample))
        reported = {sid for r in f.iter_results(sample_msg) for sid in r.match.subscriptions}
        ids = {s.id for s in sample}
        extra = [by_id[i] for i in sorted(reported)[: args.baseline_sample] if i not in ids]
        checked = check(f, sample + extra, sample_msg)
        if n <= args.baseline_direct:
            base = baseline_rate(all_subs[:n], base_msg, 20, repeat)
            how = "direct"
        else:
            base = baseline_rate(sample, base_msg, 20, repeat) * len(sample) / n
            how = f"sample {len(sample)}, scaled"
        row = {"workload": workload, "subscriptions": n,
               "engine_events_per_s": round(rate, 1), "engine_wall_events_per_s": round(wall, 1),
               "baseline_events_per_s": round(base, 4), "speedup": round(rate / base, 1),
               "baseline": how, "matches_per_event": round(matches / events, 2),
               "checked_matches": checked,
               "load_subscriptions_per_s": round(loaded / load_s) if load_s else None,
               "compile_s": round(compile_s, 2),
               "rss_mib": round(psutil.Process().memory_info().rss / 2**20)}
        rows.append(row)
        print(f"{workload} N={n}: {row}", file=sys.stderr, flush=True)
    del f
    gc.unfreeze()
    gc.collect()
    return rows


def ablations(size: int, events: int, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Fresh engines at ``size`` sparse subscriptions, measured in turns."""
    subs = xmlgen.subscriptions(size)
    messages = list(xmlgen.epcis_messages(events // 2, per_message=1000))
    configs: dict[str, dict[str, Any]] = {
        "default (access, pre-check on)": {},
        "pre-check off": {"precheck": False},
        "literal counting strategy": {"strategy": "counting"},
        "no serialisation": {"serialize": False},
    }
    engines: dict[str, XmlEventFilter] = {}
    for name, kw in configs.items():
        g = XmlEventFilter(**kw)
        for s in subs:
            g.subscribe(s)
        list(g.iter_results(messages[0]))
        engines[name] = g
    gc.collect()
    gc.freeze()
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    wall: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(repeat):
        for name, g in engines.items():
            c, w, _ = engine_rate(g, messages, 1)
            cpu[name].append(c)
            wall[name].append(w)
    gc.unfreeze()
    return ({k: round(statistics.median(v), 1) for k, v in cpu.items()},
            {k: round(statistics.median(v), 1) for k, v in wall.items()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--full", action="store_true")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                    help="sizes of the sparse workload")
    ap.add_argument("--workloads", type=lambda s: s.split(","),
                    default=["sparse", "dense", "equality", "range"])
    ap.add_argument("--other-size", type=int, default=10_000,
                    help="size of the dense, equality and range workloads")
    ap.add_argument("--events", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--no-ablations", action="store_true")
    ap.add_argument("--baseline-sample", type=int, default=1000)
    ap.add_argument("--baseline-direct", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if args.quick:
        sizes, events, repeat = [10, 1000, 10_000, 100_000], 5000, 3
    elif args.full:
        sizes, events, repeat = [10, 100, 1000, 10_000, 100_000, 183_275, 200_000], 20_000, 5
    else:
        sizes, events, repeat = [10, 100, 1000, 10_000, 100_000, 183_275], 10_000, 3
    sizes = args.sizes or sizes
    events = args.events or events
    repeat = args.repeat or repeat

    load_start = os.getloadavg()
    cal_start = calibrate()
    rows: list[dict[str, Any]] = []
    for w in args.workloads:
        rows += measure(w, sizes if w == "sparse" else [args.other_size], events, repeat, args)
    abl: dict[str, float] = {}
    abl_wall: dict[str, float] = {}
    big = min(max(sizes), 100_000)
    if not args.no_ablations:
        abl, abl_wall = ablations(big, events, repeat)
    cal_end = calibrate()

    print("| workload | subscriptions | events/s (CPU) | events/s (wall) | XPath baseline "
          "events/s | speedup | matches/event | loading subs/s | compile s | RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['subscriptions']:,} | {r['engine_events_per_s']:,.0f} | "
              f"{r['engine_wall_events_per_s']:,.0f} | {r['baseline_events_per_s']:,.3f} | "
              f"{r['speedup']:,.0f}x | {r['matches_per_event']} | "
              f"{r['load_subscriptions_per_s'] or 0:,} | {r['compile_s']} | {r['rss_mib']} |")
    if abl:
        print(f"\nAblations at {big:,} sparse subscriptions (events/s CPU / wall, fresh "
              "engines measured in turns):")
        for k, v in abl.items():
            print(f"- {k}: {v:,.0f} / {abl_wall[k]:,.0f}")
    print(f"\nCalibration loop: {cal_start:.2f} s at start, {cal_end:.2f} s at end "
          f"(CPU time, about 0.2-0.3 s on a modern core); load average {load_start} at "
          f"start, {os.getloadavg()} at end")
    result = {
        "benchmark": "xmlfilter",
        "mode": "quick" if args.quick else "full" if args.full else "default",
        "events": events, "repeat": repeat, "events_per_message": 1000,
        "rows": rows, "ablations": abl, "ablations_wall": abl_wall,
        "loadavg_start": load_start, "loadavg": os.getloadavg(),
        "calibration_s": [round(cal_start, 3), round(cal_end, 3)],
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "machine": platform.machine(),
        "note": "shared 2-core machine with other jobs running: absolute figures are noisy; "
                "the speedup is measured in the same run",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
