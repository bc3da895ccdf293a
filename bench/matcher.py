"""Matcher benchmark: the PrimAS index and the counting matcher against a plain Python
per-profile loop measured in the same run (the baseline), checked against the reference
matcher (the oracle).

Standard workload (``bench/workload.py``): one event type with 10 int attributes
(0..999) and 2 enums; profiles with 1-5 conditions tuned to about 5 matches per event
at every size. Every size runs in its own process so that its peak RSS is its own.

    python bench/matcher.py --quick          # 1k, 10k, 100k profiles, < 3 minutes
    python bench/matcher.py                  # same sizes, more repeats
    python bench/matcher.py --full           # adds 1,000,000 profiles

Figures: build time and profiles added/s (add() of every profile plus the first compile),
per-event ``match()`` events/s, batch events/s (columnar ``match_columns`` -> CSR, and
``match_batch`` on Event objects), matches per event, peak RSS; each as the median of
``--repeats`` runs and as a ratio against the plain Python loop timed in the same
process. The ratios use the plain loop, not the reference matcher: the reference is the
oracle, written for clarity (``Profile.matches`` per profile, then a sort), and is slower
than the plain loop, so ratios against it would be inflated; its speed is printed for
information. Match counts of every engine are checked against the reference on the
events the reference matched, so a faster but wrong engine fails the run.

The machine may be shared: wall-clock figures are noisy. CPU time of this process is
reported alongside (``cpu_*``) as a steadier view.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from siftbus.match import kernel  # noqa: E402
from siftbus.match.counting import CountingMatcher  # noqa: E402
from siftbus.match.index import IndexMatcher  # noqa: E402
from siftbus.match.reference import ReferenceMatcher  # noqa: E402
from siftbus.model import Event, IntervalSet, Profile  # noqa: E402
from workload import (  # noqa: E402
    building_events,
    building_profiles,
    columns_of,
    expected_matches,
    standard_event_keys,
    standard_profiles,
    standard_schema,
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rate(fn: Callable[[int], int], total: int, min_time: float, repeats: int
         ) -> tuple[float, float]:
    """Median events/s (wall, cpu) of ``fn(i)`` -> events done, run until ``min_time``."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeats):
        done = 0
        i = 0
        t0 = time.perf_counter()
        c0 = time.process_time()
        while True:
            done += fn(i % total)
            i += 1
            if time.perf_counter() - t0 >= min_time or i >= total * 50:
                break
        walls.append(done / (time.perf_counter() - t0))
        cpus.append(done / max(time.process_time() - c0, 1e-9))
    return statistics.median(walls), statistics.median(cpus)


class PlainLoop:
    """The baseline every index must beat: a Python loop over per-profile tuples."""

    def __init__(self, profiles: Sequence[Profile]) -> None:
        self.table: list[tuple[str, list[tuple[int, int, int]]]] = []
        for p in sorted(profiles, key=lambda p: p.id):
            if all(isinstance(c.constraint, IntervalSet) and len(c.constraint.intervals) == 1
                   for c in p.conditions):
                self.table.append((p.id, [(c.position, c.constraint.intervals[0][0],  # type: ignore[union-attr]
                                           c.constraint.intervals[0][1])  # type: ignore[union-attr]
                                          for c in p.conditions]))
            else:  # sets and holes: ask the profile
                self.table.append((p.id, [(-1, 0, 0)]))
        self.slow = {p.id: p for p in profiles}

    def match(self, event: Event) -> list[str]:
        keys = event.keys
        out = []
        for pid, conds in self.table:
            for pos, lo, hi in conds:
                if pos < 0:
                    if not self.slow[pid].matches(event):
                        break
                elif not lo <= keys[pos] <= hi:  # type: ignore[operator]
                    break
            else:
                out.append(pid)
        return out


def baselines(profiles: Sequence[Profile], events: Sequence[Event], res: dict[str, Any],
              min_t: float, repeats: int) -> list[list[str]]:
    """Time the reference matcher and the plain loop; returns the reference's rows."""
    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    rows = [ref.match(e) for e in events]
    res["reference_eps"], res["reference_cpu_eps"] = rate(
        lambda i: len([ref.match(events[i])]) or 1, len(events), min_t, repeats)
    loop = PlainLoop(profiles)
    assert [loop.match(e) for e in events] == rows, "plain loop disagrees"
    res["loop_eps"], res["loop_cpu_eps"] = rate(
        lambda i: len([loop.match(events[i])]) or 1, len(events), min_t, repeats)
    return rows


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """All measurements for one profile count (runs in a child process)."""
    schema = standard_schema()
    etype = schema.types[0]
    t0 = time.perf_counter()
    profiles = standard_profiles(n, seed=args.seed, values=args.values)
    gen_s = time.perf_counter() - t0
    n_events = args.events
    keys = standard_event_keys(n_events, seed=args.seed + 1, values=args.values,
                               profile_seed=args.seed)
    events = [Event(etype, tuple(row)) for row in keys.tolist()]
    cols = columns_of(etype, keys)
    gc.collect()
    rss_profiles = current_rss_mb()
    res: dict[str, Any] = {"profiles": n, "values": args.values, "generate_s": gen_s,
                           "expected_matches": expected_matches(profiles)
                           if args.values == "uniform" else None,
                           "rss_profiles_mb": rss_profiles}
    min_t = args.min_time

    n_ref = max(3, min(n_events, int(200_000 / max(n, 1)) + 3))
    ref_rows = baselines(profiles, events[:n_ref], res, min_t, args.repeats)
    gc.collect()
    # Load the cached numba kernels before timing builds (start-up is reported apart).
    t0 = time.perf_counter()
    for factory in (IndexMatcher, CountingMatcher):
        warm = factory(pending_limit=0)
        warm.add(profiles[0])
        warm.match_batch(events[:2])
    res["kernel_startup_s"] = time.perf_counter() - t0

    for name, factory in (("index", IndexMatcher), ("counting", CountingMatcher)):
        if name == "counting" and n > args.counting_max:
            continue
        gc.collect()
        base_rss = current_rss_mb()
        t0 = time.perf_counter()
        c0 = time.process_time()
        m = factory()
        for p in profiles:
            m.add(p)
        t_add = time.perf_counter() - t0
        m.match(events[0])  # compiles
        t_build = time.perf_counter() - t0
        c_build = time.process_time() - c0
        r: dict[str, Any] = {"add_s": t_add, "build_s": t_build, "build_cpu_s": c_build,
                             "profiles_per_s": n / t_build,
                             "profiles_per_cpu_s": n / c_build}
        got = [m.match(e) for e in events[:n_ref]]
        assert got == ref_rows, f"{name} disagrees with the reference"
        r["event_eps"], r["event_cpu_eps"] = rate(
            lambda i, m=m: len([m.match(events[i])]) or 1, n_events, min_t, args.repeats)
        chunk = min(n_events, 2000)

        def batch(i: int, m: Any = m, chunk: int = chunk) -> int:
            s = (i * chunk) % max(1, n_events - chunk + 1)
            m.match_batch(events[s:s + chunk])
            return chunk

        r["match_batch_eps"], r["match_batch_cpu_eps"] = rate(batch, n_events, min_t,
                                                              args.repeats)
        sample = m.match_batch(events[:2000])
        r["matches_per_event"] = sum(len(x) for x in sample) / len(sample)
        if isinstance(m, IndexMatcher):
            snap = m.snapshot()
            csr = snap.match_columns(etype.name, cols)
            assert csr.rows(snap.profile_ids)[:n_ref] == ref_rows, "columnar path disagrees"
            r["matches_per_event"] = csr.n_matches / n_events
            r["columns_eps"], r["columns_cpu_eps"] = rate(
                lambda i, snap=snap: snap.match_columns(etype.name, cols).n_events,
                1, min_t, args.repeats)
            st = m.stats()
            r["index_mb"] = st.index_bytes / 2**20
            r["bitmap_sets"] = st.bitmap_sets
            r["list_sets"] = st.list_sets
            r["cells"] = st.cells
            r["order"] = list(st.order.get(etype.name, ()))
            del snap, csr
        r["rss_growth_mb"] = current_rss_mb() - base_rss
        r["peak_rss_mb"] = peak_rss_mb()
        res[name] = r
        del m
    return res


def run_building(n: int, n_events: int, min_t: float, repeats: int) -> dict[str, Any]:
    """Bittner's building-automation workload: several event types, strings, decimals."""
    profiles = building_profiles(n)
    events = building_events(n_events)
    res: dict[str, Any] = {"profiles": n, "events": n_events}
    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    sample = events[:200]
    want = ref.match_batch(sample)
    res["reference_eps"], _ = rate(lambda i: len([ref.match(sample[i])]) or 1, len(sample),
                                   min_t, repeats)
    for name, factory in (("index", IndexMatcher), ("counting", CountingMatcher)):
        m = factory()
        t0 = time.perf_counter()
        for p in profiles:
            m.add(p)
        m.match_batch(events[:1])
        build = time.perf_counter() - t0
        assert [m.match(e) for e in sample] == want, f"{name} disagrees on building"
        eps, _ = rate(lambda i, m=m: len([m.match(events[i])]) or 1, len(events), min_t,
                      repeats)
        beps, _ = rate(lambda i, m=m: len(m.match_batch(events)), 1, min_t, repeats)
        res[name] = {"build_s": build, "event_eps": eps, "match_batch_eps": beps,
                     "x_reference": eps / res["reference_eps"]}
    # The building workload has strings and several types: no plain-loop twin, so its
    # ratio is against the oracle and says so.
    res["matches_per_event"] = sum(len(r) for r in want) / len(want)
    return res


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: every rate as wall / CPU-time events per second."""
    def both(r: dict[str, Any], key: str) -> str:
        return f"{r[key]:,.0f} / {r[key.replace('_eps', '_cpu_eps')]:,.0f}"

    rows = ["| profiles | engine | build s | profiles/s | match() ev/s | batch columns ev/s | "
            "match_batch ev/s | x plain loop: match() / batch | matches/ev | peak RSS MB |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        n = res["profiles"]
        rows.append(f"| {n:,} | plain loop (baseline) | - | - | {both(res, 'loop_eps')} | - | "
                    f"- | 1 | - | - |")
        rows.append(f"| {n:,} | reference (oracle, not a baseline) | - | - | "
                    f"{both(res, 'reference_eps')} | - | - | "
                    f"{res['reference_cpu_eps'] / res['loop_cpu_eps']:.2f} | - | - |")
        for name in ("index", "counting"):
            r = res.get(name)
            if r is None:
                continue
            cols = r.get("columns_cpu_eps")
            best_batch = cols or r["match_batch_cpu_eps"]
            rows.append(
                f"| {n:,} | {name} | {r['build_s']:.2f} | {r['profiles_per_s']:,.0f} / "
                f"{r['profiles_per_cpu_s']:,.0f} | {both(r, 'event_eps')} | "
                f"{'-' if cols is None else both(r, 'columns_eps')} | "
                f"{both(r, 'match_batch_eps')} | "
                f"{r['event_cpu_eps'] / res['loop_cpu_eps']:,.0f} / "
                f"{best_batch / res['loop_cpu_eps']:,.0f} | "
                f"{r.get('matches_per_event', float('nan')):.1f} | {r['peak_rss_mb']:,.0f} |")
    return "\n".join(rows)


def growth(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Time per event ratio for each 10x step of profiles (target: <= 3)."""
    out = []
    by_n = {r["profiles"]: r for r in results}
    for n in sorted(by_n):
        if n * 10 in by_n and "index" in by_n[n] and "index" in by_n[n * 10]:
            a, b = by_n[n]["index"], by_n[n * 10]["index"]
            out.append({
                "from": n, "to": n * 10,
                "event_time_ratio": a["event_cpu_eps"] / b["event_cpu_eps"],
                "batch_time_ratio": a["columns_cpu_eps"] / b["columns_cpu_eps"],
            })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="siftbus matcher benchmark")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short run (< 3 minutes)")
    mode.add_argument("--full", action="store_true", help="also 1,000,000 profiles")
    ap.add_argument("--sizes", type=int, nargs="*", help="profile counts to run")
    ap.add_argument("--values", choices=["uniform", "zipf"], default="uniform")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds per repeat")
    ap.add_argument("--counting-max", type=int, default=100_000,
                    help="largest profile count for the counting matcher")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "matcher.json")
    ap.add_argument("--building", type=int, default=20_000,
                    help="profiles of the building-automation run (0: skip)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--one-building", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    # The numba kernels unless SIFTBUS_KERNELS says otherwise (auto would time the Python
    # kernels for the first quarter second).
    kernel.use(os.environ.get(kernel.ENV) or "numba")
    if args.one is not None:
        print(json.dumps(run_size(args.one, args)))
        return
    if args.one_building is not None:
        print(json.dumps(run_building(args.one_building, min(args.events, 10_000),
                                      args.min_time, args.repeats)))
        return
    if args.quick:
        args.repeats = min(args.repeats, 3)
        args.min_time = min(args.min_time, 0.3)
        args.events = min(args.events, 10_000)
    sizes = args.sizes or ([1_000, 10_000, 100_000] + ([1_000_000] if args.full else []))
    results = []
    for n in sizes:
        cmd = [sys.executable, __file__, "--one", str(n), "--values", args.values,
               "--events", str(args.events), "--repeats", str(args.repeats),
               "--min-time", str(args.min_time), "--counting-max", str(args.counting_max),
               "--seed", str(args.seed)]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        res["wall_s"] = time.perf_counter() - t0
        results.append(res)
        print(f"  {n:,} profiles done in {res['wall_s']:.0f} s", file=sys.stderr)
    building = None
    if args.building:
        out = subprocess.run([sys.executable, __file__, "--one-building", str(args.building),
                              "--events", str(args.events), "--repeats", str(args.repeats),
                              "--min-time", str(args.min_time)],
                             check=True, capture_output=True, text=True)
        building = json.loads(out.stdout.strip().splitlines()[-1])
    md = table(results)
    grow = growth(results)
    print(md)
    if building is not None:
        print(f"\nbuilding automation, {building['profiles']:,} profiles, "
              f"{building['matches_per_event']:.1f} matches/event: reference "
              f"{building['reference_eps']:,.0f} ev/s; " + "; ".join(
                  f"{k} match() {building[k]['event_eps']:,.0f} ev/s "
                  f"(x{building[k]['x_reference']:,.0f} the oracle), match_batch "
                  f"{building[k]['match_batch_eps']:,.0f} ev/s"
                  for k in ("index", "counting")))
    for g in grow:
        print(f"\n{g['from']:,} -> {g['to']:,} profiles: time per event x"
              f"{g['event_time_ratio']:.2f} (match), x{g['batch_time_ratio']:.2f} (batch)")
    load = os.getloadavg()
    print(f"\nrates are wall / CPU time of the benchmark process; load average {load[0]:.1f} "
          f"on {os.cpu_count()} CPUs: wall figures are noisy, ratios use CPU time and the plain "
          "loop (the reference matcher is the oracle and slower than the plain loop).")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "matcher", "mode": "quick" if args.quick else "full" if args.full
        else "default", "values": args.values, "repeats": args.repeats,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg": load, "platform": platform.platform()},
        "results": results, "growth": grow, "building": building, "table": md},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
