"""Temporal subspace matching: the DoubleForest against a linear scan, preloading, memory.

Workload (seeded, ``workload()``): documents about a large building (``Document``:
``room`` int[1,1000], ``kind`` one of six, ``level`` int[0,9], ``topic`` int[0,9999]). A
persistent notification is an area: one room (50 %), a short range of rooms (30 %), a
floor's 30 rooms (19.8 %) or the whole building (0.2 %), often one kind, sometimes a
level range and a topic range, so a point context selects about 1 % of them. Half
of the filters are mobile clients' contexts, a point ``Document(room = r)`` with
``overlaps`` (the preloadable shape); the others are interests (a room range, a kind, a
topic range) with a random semantics.

At each size n the DoubleForest holds n notifications and n filters (``load``), then per
operation (CPU µs, median over ``--repeat`` rounds of samples):

* ``publish`` a new notification (insert + the filters it reaches: its changes) and
  ``withdraw`` it again (delete + the filters that lose it);
* ``subscribe`` a new filter (insert + its initial collection: the late subscriber) and
  ``unsubscribe`` it;
* ``notes_for`` (a box filter's collection, each semantics in turn) and ``filters_for``
  (which filters a notification box reaches), both query directions;
* ``lookup``: a point context ``Document(room = r)`` answered from the preload table
  (the selection, ids not materialised: O(1)), the same query through the forest
  (``preload=False``) and by the linear scan;

each beside the **linear scan** answering the same question in the same run (every
filter or every notification tested with its semantics; results checked equal). Memory
per stored entry: RSS growth while loading each side, and tracemalloc bytes (Python
objects and numpy, not the roaring bitmaps) at one size. The machine is shared (2 cores,
other engineers' jobs): CPU time is reported, it moves less than wall time; the load
average is in the JSON.

    .venv/bin/python bench/temporal.py            # 1k, 10k, 100k
    .venv/bin/python bench/temporal.py --quick    # 1k, 10k
    .venv/bin/python bench/temporal.py --sizes 1000 10000 100000 300000 1000000

From 300k on, ``--sample`` is capped at ``LARGE_SAMPLE`` operations per round (each
operation's answer grows with n; the medians stay over ``--repeat`` rounds). Two runs
(e.g. the small sizes with tracemalloc, and 1M alone with ``--no-tracemalloc``, run side
by side) are joined by ``--combine A.json B.json`` into ``--out`` and its plot; each row
keeps its own same-run baseline and load average.
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
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from siftbus.model import IntervalSet, Profile, parse_schema
from siftbus.model.constraint import Constraint
from siftbus.temporal import DoubleForest, PersistentNotification, Semantics, TemporalFilter

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "temporal.json"
PLOT = HERE / "results" / "temporal.png"
LARGE = 300_000
LARGE_SAMPLE = 100
RSS_FLOOR = 50
"""RSS growth below this many bytes per entry means reused heap: not plotted."""

SCHEMA = parse_schema('[Document]\nroom = "int[1,1000]"\n'
                      'kind = "enum[memo,menu,plan,alarm,photo,notice]"\n'
                      'level = "int[0,9]"\ntopic = "int[0,9999]"\n')
DOC = SCHEMA["Document"]


def _area(rng: random.Random, pid: str) -> Profile:
    cons: dict[str, Constraint] = {}
    r = rng.random()
    if r < 0.5:
        cons["room"] = IntervalSet.points([rng.randint(1, 1000)])
    elif r < 0.8:
        a = rng.randint(1, 990)
        cons["room"] = IntervalSet.range(a, a + rng.randint(1, 9))
    elif r < 0.998:
        floor = rng.randint(0, 32)
        cons["room"] = IntervalSet.range(floor * 30 + 1, floor * 30 + 30)
    if rng.random() < 0.7:
        cons["kind"] = IntervalSet.points([rng.randint(0, 5)])
    if rng.random() < 0.3:
        a = rng.randint(0, 9)
        cons["level"] = IntervalSet.range(a, rng.randint(a, 9))
    if rng.random() < 0.5:
        a = rng.randint(0, 9999)
        cons["topic"] = IntervalSet.range(a, min(9999, a + rng.randint(0, 500)))
    return Profile.from_constraints(pid, DOC, cons)


def _context(rng: random.Random, pid: str) -> Profile:
    return Profile.from_constraints(pid, DOC,
                                    {"room": IntervalSet.points([rng.randint(1, 1000)])})


def _interest(rng: random.Random, pid: str) -> Profile:
    a = rng.randint(1, 970)
    cons: dict[str, Constraint] = {"room": IntervalSet.range(a, a + rng.randint(0, 30))}
    if rng.random() < 0.6:
        cons["kind"] = IntervalSet.points(rng.sample(range(6), rng.randint(1, 2)))
    if rng.random() < 0.5:
        t = rng.randint(0, 9999)
        cons["topic"] = IntervalSet.range(t, min(9999, t + rng.randint(0, 2000)))
    return Profile.from_constraints(pid, DOC, cons)


def notification(rng: random.Random, nid: str) -> PersistentNotification:
    return PersistentNotification(nid, _area(rng, nid), "bench")


def temporal_filter(rng: random.Random, fid: str) -> TemporalFilter:
    if rng.random() < 0.5:
        return TemporalFilter(_context(rng, fid))
    return TemporalFilter(_interest(rng, fid), rng.choice(list(Semantics)))


def workload(n: int, seed: int = 20) -> tuple[list[PersistentNotification], list[TemporalFilter]]:
    rng = random.Random(seed)
    return ([notification(rng, f"n{i}") for i in range(n)],
            [temporal_filter(rng, f"f{i}") for i in range(n)])


# ---- the linear scan ----------------------------------------------------------------

class Linear:
    """Every question answered by testing every stored entry (the same-run baseline)."""

    def __init__(self, notes: list[PersistentNotification], filters: list[TemporalFilter]):
        self.notes = {n.id: n for n in notes}
        self.filters = {f.id: f for f in filters}

    def notes_for(self, q: Profile, s: Semantics) -> list[str]:
        return [n.id for n in self.notes.values() if s.selects(q, n.subspace)]

    def filters_for(self, box: Profile) -> list[str]:
        return [f.id for f in self.filters.values() if f.semantics.selects(f.profile, box)]


# ---- measuring ------------------------------------------------------------------------

def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_us(fn: Callable[[Any], Any], args: list[Any], repeat: int) -> float:
    """Median over ``repeat`` rounds of the CPU µs per call of ``fn`` on ``args``."""
    rounds = []
    for _ in range(repeat):
        t = time.process_time()
        for a in args:
            fn(a)
        rounds.append((time.process_time() - t) / len(args) * 1e6)
    return statistics.median(rounds)


def measure(n: int, sample: int, repeat: int) -> dict[str, Any]:
    notes, filters = workload(n)
    gc.collect()
    rss0 = _rss()
    t0 = time.process_time()
    df = DoubleForest()
    df.load(notes)
    gc.collect()
    rss1 = _rss()
    df.load(filters=filters)
    gc.collect()
    rss2 = _rss()
    load_cpu = time.process_time() - t0
    lin = Linear(notes, filters)
    # The stored state is long-lived: a full collection of Python's cyclic GC walks all
    # of it (its pause grows with n) and lands in whichever timed round it falls. We
    # measure that pause once, then freeze the state (as a server would after a bulk
    # load, and as bench/xmlfilter.py does) so the rounds time the structure itself.
    t_gc = time.process_time()
    gc.collect()
    gc_full_ms = (time.process_time() - t_gc) * 1e3
    gc.freeze()
    rng = random.Random(n)
    few = max(3, min(sample, 200_000 // n))  # linear-scan samples (1 s per op at 1M)
    row: dict[str, Any] = {"n": n, "load_cpu_s": round(load_cpu, 2),
                           "notes_bytes_per_entry_rss": round((rss1 - rss0) / n),
                           "filters_bytes_per_entry_rss": round((rss2 - rss1) / n),
                           "gc_full_ms": round(gc_full_ms, 1),
                           "forest_depth_notes": df.notes.forest.depth(),
                           "roots_notes": len(df.notes.forest.roots())}

    # publish + withdraw (the filters a new notification reaches)
    fresh = [notification(rng, f"x{i}") for i in range(sample)]
    for x in fresh[:3]:  # the answer is right
        got = sorted(c.filter for c in df.publish(x))
        assert got == sorted(lin.filters_for(x.subspace)), "publish reached other filters"
        df.withdraw(x.id)
    rounds_pub, rounds_wd = [], []
    for _ in range(repeat):
        t = time.process_time()
        for x in fresh:
            df.publish(x)
        rounds_pub.append((time.process_time() - t) / sample * 1e6)
        t = time.process_time()
        for x in fresh:
            df.withdraw(x.id)
        rounds_wd.append((time.process_time() - t) / sample * 1e6)
    row["publish_us"] = statistics.median(rounds_pub)
    row["withdraw_us"] = statistics.median(rounds_wd)
    row["publish_linear_us"] = _cpu_us(lambda x: lin.filters_for(x.subspace), fresh[:few], 1)

    # subscribe + unsubscribe (the late subscriber's initial collection)
    new_filters = [temporal_filter(rng, f"y{i}") for i in range(sample)]
    for f in new_filters[:3]:
        got = sorted(c.notification.id for c in df.subscribe(f))
        assert got == sorted(lin.notes_for(f.profile, f.semantics)), "subscribe got others"
        df.unsubscribe(f.id)
    rounds_sub, rounds_uns = [], []
    for _ in range(repeat):
        t = time.process_time()
        for f in new_filters:
            df.subscribe(f)
        rounds_sub.append((time.process_time() - t) / sample * 1e6)
        t = time.process_time()
        for f in new_filters:
            df.unsubscribe(f.id)
        rounds_uns.append((time.process_time() - t) / sample * 1e6)
    row["subscribe_us"] = statistics.median(rounds_sub)
    row["unsubscribe_us"] = statistics.median(rounds_uns)
    row["subscribe_linear_us"] = _cpu_us(lambda f: lin.notes_for(f.profile, f.semantics),
                                         new_filters[:few], 1)

    # both query directions on box queries
    boxes = [_interest(rng, f"q{i}") for i in range(sample)]
    for s in Semantics:
        for q in boxes[:3]:
            assert sorted(df.notifications_for(q, s)) == sorted(lin.notes_for(q, s))
        row[f"notes_for_{s.value}_us"] = _cpu_us(
            lambda q, s=s: df.notifications_for(q, s).ids(), boxes, repeat)
    areas = [_area(rng, f"a{i}") for i in range(sample)]
    for a in areas[:3]:
        assert df.filters_for(a) == sorted(lin.filters_for(a))
    row["filters_for_us"] = _cpu_us(df.filters_for, areas, repeat)
    row["notes_for_linear_us"] = _cpu_us(lambda q: lin.notes_for(q, Semantics.OVERLAPS),
                                         boxes[:few], 1)
    row["filters_for_linear_us"] = _cpu_us(lin.filters_for, areas[:few], 1)

    # point contexts: preloaded lookup, the forest, the linear scan
    points = [_context(rng, f"c{i}") for i in range(max(sample, 1000))]
    for q in points[:3]:
        sel = df.notifications_for(q)
        assert sel.preloaded and sorted(sel) == sorted(lin.notes_for(q, Semantics.OVERLAPS))
    row["lookup_us"] = _cpu_us(lambda q: len(df.notifications_for(q)), points, repeat)
    t = time.perf_counter()
    for q in points:
        df.notifications_for(q)
    row["lookup_wall_us"] = (time.perf_counter() - t) / len(points) * 1e6
    row["lookup_forest_us"] = _cpu_us(
        lambda q: len(df.notifications_for(q, preload=False)), points[:sample], repeat)
    row["lookup_linear_us"] = _cpu_us(lambda q: lin.notes_for(q, Semantics.OVERLAPS),
                                      points[:few], 1)
    row["lookup_result_mean"] = statistics.mean(len(df.notifications_for(q))
                                                for q in points[:100])
    row["publish_reached_mean"] = statistics.mean(len(lin.filters_for(x.subspace))
                                                  for x in fresh[:few])
    # The answers grow with n (a context selects a fixed share of the stored entries):
    # the forest's cost per reported entry shows what a query pays beyond its answer.
    row["notes_for_result_mean"] = statistics.mean(
        len(df.notifications_for(q, Semantics.OVERLAPS)) for q in boxes)
    row["filters_for_result_mean"] = statistics.mean(len(df.filters_for(a)) for a in areas)
    row["sample"] = sample
    row["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    gc.unfreeze()  # the nodes' parent links are cycles: let the next collection free them
    return row


def tracemalloc_bytes(n: int) -> dict[str, float]:
    """Python and numpy bytes per entry (tracemalloc; roaring bitmaps not counted)."""
    notes, filters = workload(n, seed=21)
    gc.collect()
    tracemalloc.start()
    df = DoubleForest()
    base = tracemalloc.get_traced_memory()[0]
    df.load(notes)
    mid = tracemalloc.get_traced_memory()[0]
    df.load(filters=filters)
    end = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # The profiles themselves are the caller's (they exist before they are stored).
    return {"n": n, "notes_bytes_per_entry": round((mid - base) / n),
            "filters_bytes_per_entry": round((end - mid) / n)}


HEADER = ("| n | publish µs | ×linear | withdraw µs | subscribe µs | ×linear | "
          "notes_for µs (ov/cb/cv) | ×linear | filters_for µs | ×linear | lookup µs | "
          "forest µs | linear µs | B/entry (notes, filters) |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def _line(r: dict[str, Any]) -> str:
    def x(a: str, b: str) -> str:
        return f"{r[b] / r[a]:.0f}" if r[a] else "-"
    return (f"| {r['n']:,} | {r['publish_us']:.0f} | {x('publish_us', 'publish_linear_us')} | "
            f"{r['withdraw_us']:.0f} | {r['subscribe_us']:.0f} | "
            f"{x('subscribe_us', 'subscribe_linear_us')} | "
            f"{r['notes_for_overlaps_us']:.0f}/{r['notes_for_covered-by_us']:.0f}/"
            f"{r['notes_for_covers_us']:.0f} | "
            f"{x('notes_for_overlaps_us', 'notes_for_linear_us')} | "
            f"{r['filters_for_us']:.0f} | {x('filters_for_us', 'filters_for_linear_us')} | "
            f"{r['lookup_us']:.1f} | {r['lookup_forest_us']:.0f} | "
            f"{r['lookup_linear_us']:.0f} | {r['notes_bytes_per_entry_rss']:,}, "
            f"{r['filters_bytes_per_entry_rss']:,} |")


def plot(rows: list[dict[str, Any]], path: Path, mem: dict[str, Any] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    fig, (a, b, m) = plt.subplots(1, 3, figsize=(17, 4.6))
    for name, label in (("publish", "publish"), ("subscribe", "subscribe"),
                        ("filters_for", "filters_for"), ("notes_for_overlaps", "notes_for")):
        line = a.plot(ns, [r[f"{name}_us"] for r in rows], marker="o",
                      label=f"{label} (DoubleForest)")
        base = "notes_for_linear" if name == "notes_for_overlaps" else f"{name}_linear"
        a.plot(ns, [r[f"{base}_us"] for r in rows], marker="x", linestyle="--",
               color=line[0].get_color(), label=f"{label} (linear scan)")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("stored notifications = stored filters (n)")
    a.set_ylabel("CPU µs per operation")
    a.set_title("DoubleForest against a linear scan")
    a.legend(fontsize=7)
    b.plot(ns, [r["lookup_us"] for r in rows], marker="o", label="preloaded lookup")
    b.plot(ns, [r["lookup_forest_us"] for r in rows], marker="s", label="forest walk")
    b.plot(ns, [r["lookup_linear_us"] for r in rows], marker="x", linestyle="--",
           label="linear scan")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("stored notifications (n)")
    b.set_ylabel("CPU µs per point query Document(room = r)")
    b.set_title("Preloading: lookup latency flat in n")
    b.legend(fontsize=8)
    # RSS grows only once the heap's free memory is used up: after a larger size (or the
    # tracemalloc step) ran in the same process it under-reports, down to zero.
    fresh = [r for r in rows if min(r["notes_bytes_per_entry_rss"],
                                     r["filters_bytes_per_entry_rss"]) >= RSS_FLOOR]
    m.plot([r["n"] for r in fresh], [r["notes_bytes_per_entry_rss"] for r in fresh],
           marker="o", label="notification (RSS growth)")
    m.plot([r["n"] for r in fresh], [r["filters_bytes_per_entry_rss"] for r in fresh],
           marker="s", label="filter (RSS growth)")
    if mem:
        m.plot([mem["n"]], [mem["notes_bytes_per_entry"]], marker="*", markersize=12,
               linestyle="none", label="notification (tracemalloc)")
        m.plot([mem["n"]], [mem["filters_bytes_per_entry"]], marker="P", markersize=10,
               linestyle="none", label="filter (tracemalloc)")
    m.set_xscale("log")
    m.set_ylim(bottom=0)
    m.set_xlabel("stored entries per side (n)")
    m.set_ylabel("bytes per stored entry (profiles not counted)")
    m.set_title("Memory per stored entry")
    m.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _memory_line(mem: dict[str, Any]) -> str:
    return (f"\ntracemalloc at n = {mem['n']:,}: {mem['notes_bytes_per_entry']:,} bytes per "
            f"notification, {mem['filters_bytes_per_entry']:,} per filter (Python objects "
            "and numpy; roaring bitmaps not traced)")


def _memory_only(path: Path, n: int) -> None:
    """Add the tracemalloc figures to an earlier run's results (said so in the JSON)."""
    out = json.loads(path.read_text())
    t0 = time.process_time()
    mem: dict[str, Any] = {**tracemalloc_bytes(n), "separate_run": time.strftime(
        "%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": list(os.getloadavg()),
        "cpu_seconds": round(time.process_time() - t0, 1)}
    out["tracemalloc"] = mem
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(_memory_line(mem))


def _combine(parts: list[Path], out: Path, plot_path: Path) -> None:
    """Join the rows of several runs (sorted by n; a size measured twice keeps the later
    run's row) into ``out``; each run's command, load and CPU seconds are kept."""
    runs = [json.loads(p.read_text()) for p in parts]
    by_n: dict[int, dict[str, Any]] = {}
    mem: dict[str, Any] = {}
    for run in runs:
        for r in run["rows"]:
            by_n[r["n"]] = r
        mem = run.get("tracemalloc") or mem
    rows = [by_n[n] for n in sorted(by_n)]
    joined = {
        "benchmark": "temporal",
        "runs": [{k: run[k] for k in ("command", "started", "cpu_seconds", "loadavg")}
                 for run in runs],
        "cpu_seconds": round(sum(run["cpu_seconds"] for run in runs), 1),
        "note": runs[-1]["note"],
        "python": runs[-1]["python"],
        "machine": runs[-1]["machine"],
        "ops_per_second_publish": {r["n"]: round(1e6 / r["publish_us"]) for r in rows},
        "rows": rows,
        "tracemalloc": mem,
    }
    out.write_text(json.dumps(joined, indent=1) + "\n")
    plot(rows, plot_path, mem)
    print(HEADER)
    for r in rows:
        print(_line(r))
    if mem:
        print(_memory_line(mem))
    print(f"\nwrote {out} and {plot_path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k, small samples")
    ap.add_argument("--sizes", type=int, nargs="*", help="sizes n (overrides)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=0, help="operations per round")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--plot", type=Path, default=PLOT)
    ap.add_argument("--memory-only", type=int, metavar="N", default=0,
                    help="only the tracemalloc bytes per entry at N, added to the results "
                         "of an earlier run (one stopped before its end)")
    ap.add_argument("--replot", action="store_true", help="only draw the PNG of --out")
    ap.add_argument("--no-tracemalloc", action="store_true",
                    help="skip the tracemalloc bytes (a run beside one that measures them)")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSON",
                    help="join the rows of earlier runs into --out and draw its plot")
    args = ap.parse_args()
    if args.combine:
        _combine(args.combine, args.out, args.plot)
        return
    if args.memory_only:
        _memory_only(args.out, args.memory_only)
    if args.memory_only or args.replot:
        done = json.loads(args.out.read_text())
        plot(done["rows"], args.plot, done.get("tracemalloc"))
        return
    sizes = args.sizes or ([1000, 10_000] if args.quick else [1000, 10_000, 100_000])
    sample = args.sample or (50 if args.quick else 200)
    loads: list[tuple[float, float, float]] = [os.getloadavg()]
    started = time.time()
    cpu0 = time.process_time()
    print(HEADER, flush=True)
    rows: list[dict[str, Any]] = []
    mem: dict[str, Any] = {}

    def save() -> None:
        """Written after every size, so a run stopped early keeps what it measured."""
        ops = sum(3 * args.repeat * sample for _ in rows)
        out = {
            "benchmark": "temporal",
            "command": " ".join(sys.argv),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "cpu_seconds": round(time.process_time() - cpu0, 1),
            "loadavg": [[round(x, 2) for x in la] for la in loads],
            "note": "CPU µs per operation, medians over rounds; every figure beside the "
                    "linear scan answering the same question in the same run (answers "
                    "checked equal). lookup_us: the preloaded point query, the selection "
                    "not materialised.",
            "ops_per_second_publish": {r["n"]: round(1e6 / r["publish_us"]) for r in rows},
            "timed_operations": ops,
            "rows": rows,
            "tracemalloc": mem,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        plot(rows, args.plot, mem)

    # memory first: a run stopped during its largest size keeps it
    if not args.no_tracemalloc:
        mem.update(tracemalloc_bytes(min(max(sizes), 100_000)))
    for n in sizes:
        rows.append(measure(n, sample if n < LARGE else min(sample, LARGE_SAMPLE),
                            args.repeat))
        gc.collect()
        loads.append(os.getloadavg())
        print(_line(rows[-1]), flush=True)
        save()
    if mem:
        print(_memory_line(mem))
    print(f"\nwrote {args.out} and {args.plot}; load average {loads[0]} -> {loads[-1]}")


if __name__ == "__main__":
    main()
