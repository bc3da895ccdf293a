"""Per-event ``match()`` at 100,000 profiles, this checkout against another, in turns.

    python bench/per_event_turns.py --baseline-src /tmp/m6/src     # ~2 minutes
    python bench/per_event_turns.py --baseline-src /tmp/m6/src --as-user \
        --out bench/results/per_event_as_user_turns.json    # match(Event.of(type, dict))

Two worker processes, one importing siftbus from this checkout and one from
``--baseline-src`` (an export of another revision's ``src``, e.g. ``git archive main src``),
each load the standard workload of ``bench/ingest.py`` (100,000 profiles, 20,000 events)
and match every event once to warm up. Then they take turns, ``--rounds`` times, each
timing one loop of ``matcher.match(event)`` over the 20,000 events in CPU seconds of its
own process; who goes first alternates by round. Turns a fraction of a second long see
the same load, so the ratio of each round's pair is steadier than separate runs are on a
shared machine. Prints a markdown table and writes ``bench/results/per_event_turns.json``
with every round, the medians, the pairs' ratios and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def worker(data: Path, n_events: int, as_user: bool) -> None:
    """Load, then answer each line on stdin with the CPU seconds of one loop: of
    ``matcher.match(event)``, or with ``as_user`` of ``matcher.match(Event.of(type,
    values))`` (the event built from a dict of plain values in the loop)."""
    from siftbus.cli.match import load_matcher
    from siftbus.match import index
    from siftbus.model import Event, load_schema, parse_event

    schema = load_schema(data / "schema.toml")
    m = load_matcher(schema, data / "profiles-100000.txt")
    with (data / "events-200000.jsonl").open() as f:
        events = [parse_event(next(f), schema) for _ in range(n_events)]
    etype = events[0].etype
    dicts = [e.values() for e in events]
    for e in events:
        m.match(e)
    print("ready", index.__file__, flush=True)
    for _ in sys.stdin:
        t0 = time.process_time()
        if as_user:
            for d in dicts:
                m.match(Event.of(etype, d))
        else:
            for e in events:
                m.match(e)
        print(time.process_time() - t0, flush=True)


def spawn(src: str | None, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ)
    # this checkout's src explicitly: an editable install may point at another checkout
    env["PYTHONPATH"] = src or str(ROOT / "src")
    p = subprocess.Popen([sys.executable, __file__, "--worker", "--data", str(args.data),
                          "--events", str(args.events)] + (["--as-user"] if args.as_user
                                                           else []), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert p.stdout is not None
    line = p.stdout.readline().split()
    if not line or line[0] != "ready":
        raise RuntimeError(f"worker for {src or 'this checkout'} did not start")
    return p, line[1]


def turn(p: subprocess.Popen[str], n: int) -> float:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    return n / float(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline-src", help="the other revision's src directory")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TMPDIR", "/tmp")) / "siftbus-bench-ingest", help="bench/ingest.py's input files")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "per_event_turns.json")
    ap.add_argument("--as-user", action="store_true",
                    help="time match(Event.of(type, values)), the event built from a dict")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.data, args.events, args.as_user)
        return
    if not args.baseline_src:
        ap.error("--baseline-src is required")
    sys.path.insert(0, str(HERE))
    from ingest import ensure_data  # the same input files, made when missing

    ensure_data(args.data, 200_000, 200_000)
    base, base_at = spawn(args.baseline_src, args)
    this, this_at = spawn(None, args)
    rates: dict[str, list[float]] = {"this": [], "baseline": []}
    loads = []
    try:
        for i in range(args.rounds):
            order = (("baseline", base), ("this", this)) if i % 2 == 0 else \
                (("this", this), ("baseline", base))
            for name, p in order:
                rates[name].append(turn(p, args.events))
            loads.append(os.getloadavg()[0])
    finally:
        for p in (base, this):
            if p.stdin is not None:
                p.stdin.close()
            p.wait(timeout=60)
    ratio = [b / a for a, b in zip(rates["baseline"], rates["this"], strict=True)]
    res = {"profiles": 100_000, "events": args.events, "rounds": args.rounds,
           "loop": "match(Event.of(type, values))" if args.as_user else "match(event)",
           "this": this_at, "baseline": base_at, "events_per_cpu_s": rates,
           "median": {k: statistics.median(v) for k, v in rates.items()},
           "pair_ratio_median": statistics.median(ratio), "pair_ratio_min": min(ratio),
           "pair_ratio_max": max(ratio), "load": [min(loads), max(loads)]}
    print(f"| per-event {res['loop']}, 100,000 profiles | this checkout | baseline, same turns | "
          "pairs: median (min-max) | load |\n|---|---:|---:|---:|---:|")
    print(f"| {args.rounds} rounds of {args.events:,} events | "
          f"{res['median']['this']:,.0f} ev/CPU-s | {res['median']['baseline']:,.0f} ev/CPU-s "
          f"| x{res['pair_ratio_median']:.3f} ({min(ratio):.3f}-{max(ratio):.3f}) | "
          f"{min(loads):.1f}-{max(loads):.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
