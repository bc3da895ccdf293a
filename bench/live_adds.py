"""Live adds and removes on the broker's path, this checkout against another, in turns.

    python bench/live_adds.py --baseline-src /tmp/main-src        # ~2 minutes
    python bench/live_adds.py --baseline-src /tmp/main-src --same-width --every 10

Two worker processes, one importing siftbus from this checkout and one from
``--baseline-src`` (an export of another revision's ``src``, e.g. ``git archive main
src``), each load the standard workload of ``bench/ingest.py`` (100,000 profiles) into the
default engine's matcher (what a broker holds) and read 200,000 other standard profiles
as ``Profile`` objects (ids ``p000000``..., one character wider than the loaded ones;
``--same-width``: ``q00000``..., as wide). Then
they take turns, ``--rounds`` times. A turn adds the next ``--batch`` profiles one at a
time with ``matcher.add(profile)`` (what a broker does for each subscription), matching
one event after every ``--every`` adds (a broker matches events between subscriptions:
that is when pending profiles are compiled), then removes as many profiles, chosen at
random among the live ones (the same seed on both sides), matching the same way. Each
part is timed in CPU seconds of its own process, matches included. The index stays at
about 100,000 profiles; merges into its largest level happen when they fall due, so the
totals over all rounds are the amortised rates. Prints a markdown table and writes
``bench/results/live_adds.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def worker(data: Path, batch: int, every: int, seed: int, same_width: bool) -> None:
    """Load, then answer each line on stdin with ``add_cpu remove_cpu`` of one turn."""
    from dataclasses import replace

    from siftbus.cli.match import load_matcher
    from siftbus.match import index
    from siftbus.match.ingest import load_profile_columns
    from siftbus.model import load_schema, parse_event

    schema = load_schema(data / "schema.toml")
    m = load_matcher(schema, data / "profiles-100000.txt")  # the default engine
    pool = [p for cols in load_profile_columns(data / "profiles-200000.txt", schema)
            for p in cols.profiles()]
    if same_width:  # ids as wide as the loaded ones ("p00000"), 100,000 at most
        pool = [replace(p, id=f"q{i:05d}") for i, p in enumerate(pool[:100_000])]
    live = [p.id for cols in load_profile_columns(data / "profiles-100000.txt", schema)
            for p in cols.profiles()]
    with (data / "events-200000.jsonl").open() as f:
        events = [parse_event(next(f), schema) for _ in range(1000)]
    for e in events:
        m.match(e)
    rng = random.Random(seed)
    at = 0
    print("ready", index.__file__, flush=True)
    for _ in sys.stdin:
        new = pool[at:at + batch]
        at += batch
        t0 = time.process_time()
        for i, p in enumerate(new, 1):
            m.add(p)
            if i % every == 0:
                m.match(events[i % len(events)])
        t_add = time.process_time() - t0
        live.extend(p.id for p in new)
        gone = []
        for _ in range(len(new)):
            j = rng.randrange(len(live))
            live[j], live[-1] = live[-1], live[j]
            gone.append(live.pop())
        t0 = time.process_time()
        for i, pid in enumerate(gone, 1):
            m.remove(pid)
            if i % every == 0:
                m.match(events[i % len(events)])
        t_remove = time.process_time() - t0
        print(t_add, t_remove, flush=True)


def spawn(src: str | None, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ)
    # this checkout's src explicitly: an editable install may point at another checkout
    env["PYTHONPATH"] = src or str(ROOT / "src")
    p = subprocess.Popen([sys.executable, __file__, "--worker", "--data", str(args.data),
                          "--batch", str(args.batch), "--every", str(args.every),
                          "--seed", str(args.seed)]
                         + (["--same-width"] if args.same_width else []),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                         cwd=ROOT)
    assert p.stdout is not None
    line = p.stdout.readline().split()
    if not line or line[0] != "ready":
        raise RuntimeError(f"worker for {src or 'this checkout'} did not start")
    return p, line[1]


def turn(p: subprocess.Popen[str]) -> tuple[float, float]:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    a, r = p.stdout.readline().split()
    return float(a), float(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline-src", help="the other revision's src directory")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--every", type=int, default=100, help="adds (removes) between matches")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--same-width", action="store_true",
                    help="new ids as wide as the loaded ones (q00000...; 100,000 at most)")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TMPDIR", "/tmp")) / "siftbus-bench-ingest", help="bench/ingest.py's input files")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "live_adds.json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.data, args.batch, args.every, args.seed, args.same_width)
        return
    if args.rounds * args.batch > (100_000 if args.same_width else 200_000):
        ap.error("--rounds x --batch must be at most 200,000 (100,000 with --same-width), "
                 "the pool of new profiles")
    sys.path.insert(0, str(HERE))
    from ingest import ensure_data  # the same input files, made when missing

    ensure_data(args.data, 200_000, 200_000)
    sides: dict[str, tuple[subprocess.Popen[str], str]] = {}
    if args.baseline_src:
        sides["baseline"] = spawn(args.baseline_src, args)
    sides["this"] = spawn(None, args)
    cpu: dict[str, dict[str, list[float]]] = {k: {"add": [], "remove": []} for k in sides}
    loads = []
    try:
        for i in range(args.rounds):
            names = list(sides) if i % 2 == 0 else list(reversed(sides))
            for name in names:
                a, r = turn(sides[name][0])
                cpu[name]["add"].append(a)
                cpu[name]["remove"].append(r)
            loads.append(os.getloadavg()[0])
    finally:
        for p, _ in sides.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=120)
    res = {"profiles": 100_000, "batch": args.batch, "rounds": args.rounds,
           "every": args.every, "same_width": args.same_width, "load": [min(loads), max(loads)],
           "src": {k: v[1] for k, v in sides.items()}, "cpu_s": cpu}
    print(f"| {args.rounds} turns of {args.batch:,} adds then removes into 100,000, a match "
          f"every {args.every} | adds/CPU-s total (median turn) | removes/CPU-s total "
          "(median turn) | load |\n|---|---:|---:|---:|")
    for name, c in cpu.items():
        rates = {}
        for part in ("add", "remove"):
            total = args.batch * args.rounds / sum(c[part])
            med = statistics.median(args.batch / t for t in c[part])
            rates[part] = {"total": total, "median_turn": med}
        res[name] = rates
        print(f"| {name} | {rates['add']['total']:,.0f} ({rates['add']['median_turn']:,.0f}) "
              f"| {rates['remove']['total']:,.0f} ({rates['remove']['median_turn']:,.0f}) "
              f"| {min(loads):.1f}-{max(loads):.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
