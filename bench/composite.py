"""Composite profile benchmark: the composite engine at 10,000 composite profiles over the
building workload, against a naive evaluator measured in the same run.

Workload: Bittner's building (``bench/workload.py``: temperature, brightness, motion,
glass-break, window, lamp, button, sun, outdoor and alarm events over 300 rooms), one
event every 10 ms of event time (100 events/s for the building). The composite profiles
are per-room rules of six kinds (glass breakage then motion; window open then cold; a lamp
degrading then failing; a button pressed and no brightness within 2 min, a negation;
motion and heat in any order; glass or window, then motion) plus 5% building-wide rules
correlated by ``same room``, with random policies.

* **engine**: the composite profiles are parsed from text (timed), their components go
  into the PrimAS index, batches of 1,000 events are matched at once (``match_batch``)
  and the automata are fed with the component matches (``CompositeEngine.offer_batch``);
  events/s over the whole stream, end to end from the first event to ``flush()``.
* **engine, shuffled**: the same stream arriving out of order within a 2 s lateness bound.
* **naive**: what one writes without siftbus: every component of every profile tested
  against every event (``Profile.matches``), then each profile's reference evaluation
  (``reference_matches``: every assignment of its events to its components) over the
  events its components matched. It runs on the first ``--naive-events`` events, and the
  engine's matches on those events must equal it (else the run fails).
* **memory**: ``tracemalloc`` bytes per profile after building the engine (the profiles,
  plans, index entries) and of the automata's state after the stream, with the runs held.

    python bench/composite.py --quick         # 2,000 profiles, short streams (~1 min)
    python bench/composite.py                 # 10,000 profiles, 100,000 events, 3 repeats

Prints a markdown table and writes ``bench/results/composite.json``.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from siftbus.lang.composite import CompositeProfile, parse_composite  # noqa: E402
from siftbus.match.composite import (  # noqa: E402
    CompositeEngine,
    CompositeMatch,
    EngineLimits,
    StampedEvent,
    reference_matches,
)
from siftbus.match.index import IndexMatcher  # noqa: E402
from siftbus.model import Schema  # noqa: E402
from workload import building_events, building_schema  # noqa: E402

STEP_US = 10_000  # one event every 10 ms of event time
BATCH = 1_000

KINDS = [
    (0.24, "glass=GlassBreak(room = {r}, level > 5) -> motion=Motion(room = {r}, present = 1) "
           "within 60 s"),
    (0.19, "w=WindowContact(room = {r}, open = 1) -> t=Temperature(room = {r}, value < 17.0) "
           "within 5 min"),
    (0.10, "a=LampStatus(room = {r}, state = DEGRADED) -> b=LampStatus(room = {r}, "
           "state = FAILED) within 1 h"),
    (0.15, "b=Button(room = {r}, action = PRESS) -> not Brightness(room = {r}, lux > 300) "
           "within 2 min"),
    (0.15, "Motion(room = {r}, present = 1) and Temperature(room = {r}, value > 26.0) "
           "within 10 min"),
    (0.12, "(GlassBreak(room = {r}, level > 7) or WindowContact(room = {r}, open = 1)) -> "
           "Motion(room = {r}, present = 1) within 60 s"),
    (0.05, "GlassBreak(level > 8) -> Motion(present = 1) within 30 s same room"),
]
POLICIES = ["select first reuse", "select first consume", "select each reuse",
            "select each consume"]


def composite_lines(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    weights = [w for w, _ in KINDS]
    out = []
    for i in range(n):
        (_, text), = rnd.choices(KINDS, weights)
        room = rnd.randint(1, 300)
        out.append(f"c{i:05d}@owner-{room}: {text.format(r=room)} {rnd.choice(POLICIES)}")
    return out


def stamped(n: int, seed: int = 4) -> list[StampedEvent]:
    return [StampedEvent(e, i * STEP_US, (i,)) for i, e in enumerate(building_events(n,
                                                                                      seed=seed))]


def shuffled(events: list[StampedEvent], lateness: int, seed: int = 5) -> list[StampedEvent]:
    rnd = random.Random(seed)
    keyed = sorted(((e.time + rnd.randint(0, lateness), rnd.random(), e) for e in events),
                   key=lambda t: (t[0], t[1]))
    return [e for _, _, e in keyed]


def build(lines: list[str], schema: Schema, lateness: int = 0
          ) -> tuple[CompositeEngine, list[CompositeProfile], float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    profiles = [parse_composite(line, schema) for line in lines]
    engine = CompositeEngine(limits=EngineLimits(lateness=lateness), matcher=IndexMatcher())
    for p in profiles:
        engine.add(p)
    return engine, profiles, time.perf_counter() - t0, time.process_time() - c0


def feed(engine: CompositeEngine, events: list[StampedEvent]
         ) -> tuple[list[CompositeMatch], float, float]:
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    out: list[CompositeMatch] = []
    for i in range(0, len(events), BATCH):
        out.extend(engine.offer_batch(events[i:i + BATCH]))
    out.extend(engine.flush())
    return out, time.perf_counter() - t0, time.process_time() - c0


def naive(profiles: list[CompositeProfile], events: list[StampedEvent]
          ) -> tuple[dict[str, list[CompositeMatch]], float, float]:
    """Every component against every event, then the reference evaluation per profile."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    comps = [(p, [c.profile for c in p.components()]) for p in profiles]
    hits: dict[str, list[StampedEvent]] = defaultdict(list)
    for e in events:
        for p, cs in comps:
            for c in cs:
                if c.matches(e.event):
                    hits[p.id].append(e)
                    break
    out = {p.id: reference_matches(p, hits[p.id]) for p in profiles if hits[p.id]}
    return out, time.perf_counter() - t0, time.process_time() - c0


def by_profile(ms: list[CompositeMatch]) -> dict[str, list[object]]:
    out: dict[str, list[object]] = defaultdict(list)
    for m in ms:
        out[m.profile].append(m.key())
    return dict(out)


def memory(lines: list[str], schema: Schema, events: list[StampedEvent]) -> dict[str, Any]:
    """Bytes per profile: the built engine, and the automata's state after the stream."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    engine, profiles, _, _ = build(lines, schema)
    engine.offer_batch(events[:BATCH])  # compile the index levels before measuring state
    gc.collect()
    built = tracemalloc.get_traced_memory()[0]
    held_max = 0
    runs_max = 0
    for i in range(BATCH, len(events), BATCH):
        engine.offer_batch(events[i:i + BATCH])
        if (i // BATCH) % 5 == 0:
            gc.collect()
            held_max = max(held_max, tracemalloc.get_traced_memory()[0] - built)
            runs_max = max(runs_max, engine.stats().runs)
    gc.collect()
    held_end = tracemalloc.get_traced_memory()[0] - built
    held_max = max(held_max, held_end)
    runs_max = max(runs_max, engine.stats().runs)
    tracemalloc.stop()
    st = engine.stats()
    per_profile_runs = [engine.profile_stats(p.id).runs for p in profiles]
    n = len(profiles)
    return {
        "events": len(events),
        "engine_bytes_per_profile": round((built - base) / n),
        "state_bytes_per_profile_end": round(held_end / n),
        "state_bytes_per_profile_max": round(held_max / n),
        "runs_end": st.runs,
        "runs_max": runs_max,
        "runs_per_profile_end_mean": st.runs / n,
        "runs_per_profile_end_max": max(per_profile_runs),
        "bytes_per_run_end": round(held_end / st.runs) if st.runs else None,
        "shed": st.shed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--naive-events", type=int, default=2_000)
    ap.add_argument("--memory-events", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lateness", type=float, default=2.0, help="seconds, shuffled run")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "composite.json"))
    args = ap.parse_args()
    if args.quick:
        args.profiles, args.events, args.naive_events = 2_000, 20_000, 500
        args.memory_events, args.repeats = 10_000, 1
    load_start = os.getloadavg()
    schema = building_schema()
    lines = composite_lines(args.profiles)
    events = stamped(max(args.events, args.naive_events, args.memory_events))
    stream = events[:args.events]
    lateness = round(args.lateness * 1_000_000)
    late_arrivals = shuffled(stream, lateness)

    # warm-up: numba kernels of the index, imports (not measured)
    warm, _, _, _ = build(lines[:500], schema)
    feed(warm, events[:2_000])

    runs: dict[str, list[dict[str, float]]] = defaultdict(list)
    matches = None
    for _ in range(args.repeats):
        engine, profiles, bwall, bcpu = build(lines, schema)
        out, wall, cpu = feed(engine, stream)
        st = engine.stats()
        engine_automata = st.automata
        runs["engine"].append({"build_wall": bwall, "build_cpu": bcpu, "wall": wall,
                               "cpu": cpu, "matches": len(out), "shed": st.shed,
                               "runs_end": st.runs})
        if matches is None:
            matches = len(out)
        assert matches == len(out), "the engine is not deterministic"
        engine2, _, _, _ = build(lines, schema, lateness)
        out2, wall2, cpu2 = feed(engine2, late_arrivals)
        assert by_profile(out2) == by_profile(out), "shuffled arrival changed the matches"
        assert engine2.stats().late == 0
        runs["shuffled"].append({"wall": wall2, "cpu": cpu2, "matches": len(out2)})
        del engine, engine2, out, out2

    # naive evaluator and the correctness check on its prefix
    sample = events[:args.naive_events]
    profiles = [parse_composite(line, schema) for line in lines]
    expected, nwall, ncpu = naive(profiles, sample)
    check, _, _, _ = build(lines, schema)
    got, _, _ = feed(check, sample)
    exp_keys = {pid: [m.key() for m in ms] for pid, ms in expected.items() if ms}
    assert by_profile(got) == exp_keys, "the engine and the naive evaluator disagree"
    naive_matches = sum(len(v) for v in exp_keys.values())

    mem = memory(lines, schema, events[:args.memory_events])
    load_end = os.getloadavg()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    e_rate = args.events / med("engine", "wall")
    e_cpu_rate = args.events / med("engine", "cpu")
    s_rate = args.events / med("shuffled", "wall")
    n_rate = args.naive_events / nwall
    result: dict[str, Any] = {
        "profiles": args.profiles, "events": args.events, "naive_events": args.naive_events,
        "repeats": args.repeats, "event_rate_in_event_time": 1_000_000 / STEP_US,
        "lateness_s": args.lateness, "batch": BATCH,
        "load_start": load_start, "load_end": load_end,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "engine": {"events_per_s": e_rate, "events_per_cpu_s": e_cpu_rate,
                   "build_s": med("engine", "build_wall"),
                   "profiles_per_s": args.profiles / med("engine", "build_wall"),
                   "automata": engine_automata,
                   "matches": matches, "runs": runs["engine"]},
        "engine_shuffled": {"events_per_s": s_rate,
                            "events_per_cpu_s": args.events / med("shuffled", "cpu"),
                            "runs": runs["shuffled"]},
        "naive": {"events_per_s": n_rate, "events_per_cpu_s": args.naive_events / ncpu,
                  "wall": nwall, "cpu": ncpu, "matches": naive_matches},
        "speedup_vs_naive": e_rate / n_rate,
        "memory": mem,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    print(f"\n{args.profiles:,} composite profiles, building workload, "
          f"load average {load_start[0]:.1f} -> {load_end[0]:.1f}, "
          f"medians of {args.repeats}\n")
    st_end = runs["engine"][-1]
    print(f"automata: {engine_automata:,} for {args.profiles:,} profiles (equal rules of "
          f"different subscribers share one); runs held at the end {st_end['runs_end']:,}, "
          f"shed {st_end['shed']}\n")
    print("| evaluator | events | events/s | events/CPU-s | matches | x naive |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| engine (index + automata) | {args.events:,} | {e_rate:,.0f} | {e_cpu_rate:,.0f} "
          f"| {matches:,} | {e_rate / n_rate:,.0f}x |")
    print(f"| engine, arrival shuffled within {args.lateness:g} s | {args.events:,} | "
          f"{s_rate:,.0f} | {args.events / med('shuffled', 'cpu'):,.0f} | {matches:,} | "
          f"{s_rate / n_rate:,.0f}x |")
    print(f"| naive (every component, reference per profile) | {args.naive_events:,} | "
          f"{n_rate:,.1f} | {args.naive_events / ncpu:,.1f} | {naive_matches:,} | 1x |")
    print(f"\nbuild (parse + add {args.profiles:,} profiles): {med('engine', 'build_wall'):.2f} s"
          f" ({args.profiles / med('engine', 'build_wall'):,.0f} profiles/s)")
    print(f"memory over {mem['events']:,} events: engine {mem['engine_bytes_per_profile']:,} "
          f"B/profile; state {mem['state_bytes_per_profile_end']:,} B/profile at the end, "
          f"{mem['state_bytes_per_profile_max']:,} at most; runs held "
          f"{mem['runs_end']:,} (max {mem['runs_max']:,}, at most "
          f"{mem['runs_per_profile_end_max']} per profile), "
          f"{mem['bytes_per_run_end'] or 0:,} B/run, shed {mem['shed']}")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
