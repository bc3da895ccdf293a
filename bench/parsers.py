"""What the hardened readers cost, each beside a baseline measured in the same run.

* **Event files**: ``read_events`` (one rule for line ends, strict UTF-8, JSON depth and
  digit limits, no NaN, no lone surrogate) against the plain loop it replaced (iterate a
  binary file, decode, ``json.loads`` with the duplicate-key hook, build the event).
* **Schemas of many types**: ``parse_schema`` against ``tomllib.loads`` alone (the floor)
  and against the per-key line lookup it replaced (quadratic: 10,000 types took minutes).
* **A long quoted string in a profile**: peak traced memory per input byte of the grammar's
  STRING pattern against the pattern it replaced, and of the whole profile parser.

Prints a markdown table, writes ``bench/results/parsers.json``. Medians of ``--repeat``
runs; CPU seconds beside wall seconds; the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import time
import tomllib
import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from siftbus.lang.profile import ProfileLimits, parse_profile_text
from siftbus.model import event_from_dict, load_schema, parse_schema, read_events

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "parsers.json"
BUILDING = ROOT / "examples" / "building"

OLD_STRING = re.compile(r'"(\\.|[^"\\])*"')
"""The profile grammar's STRING terminal before: a group repeated per character."""


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn``."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def plain_loop(data: bytes, schema: Any) -> int:
    """The event reading of ``siftbus match`` before (binary lines, decode, json.loads)."""
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(k)
            out[k] = v
        return out

    n = 0
    for raw in io.BytesIO(data):
        line = raw.decode("utf-8")
        if not line.strip():
            continue
        event_from_dict(json.loads(line, parse_float=Decimal, object_pairs_hook=no_duplicates),
                        schema)
        n += 1
    return n


def bench_events(copies: int, repeat: int) -> dict[str, Any]:
    schema = load_schema(BUILDING / "schema.toml")
    data = (BUILDING / "events.jsonl").read_bytes() * copies
    n = plain_loop(data, schema)
    assert sum(1 for _ in read_events(io.BytesIO(data), schema)) == n
    new = timed(lambda: sum(1 for _ in read_events(io.BytesIO(data), schema)), repeat)
    old = timed(lambda: plain_loop(data, schema), repeat)
    return {"events": n, "bytes": len(data),
            "read_events": {"seconds": new[0], "cpu_seconds": new[1], "events_per_s": n / new[0]},
            "plain_loop": {"seconds": old[0], "cpu_seconds": old[1], "events_per_s": n / old[0]},
            "ratio": new[0] / old[0], "cpu_ratio": new[1] / old[1]}


def schema_text(n_types: int) -> str:
    return "".join(f'[T{i}]\na = "int[0,9]"\nb = "enum[LOW,MAX]"\nc = "string"\n'
                   for i in range(n_types))


def per_key_lookup(text: str) -> None:
    """The old parse: the line of every key looked up by a regex scan from the top."""
    data = tomllib.loads(text)
    lines = text.splitlines()
    for tname, table in data.items():
        header = re.compile(rf"^\s*\[\s*\"?{re.escape(tname)}\"?\s*\]")
        for aname in table:
            for i, line in enumerate(lines):
                if header.match(line):
                    keyline = re.compile(rf"^\s*\"?{re.escape(aname)}\"?\s*=")
                    for j in range(i + 1, len(lines)):
                        if keyline.match(lines[j]):
                            break
                    break
    parse_schema(text)


def bench_schemas(sizes: list[int], old_sizes: set[int], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        text = schema_text(n)
        row: dict[str, Any] = {"types": n}
        row["parse_schema"] = timed(lambda t=text: parse_schema(t), repeat)[0]  # type: ignore[misc]
        row["tomllib_only"] = timed(lambda t=text: tomllib.loads(t), repeat)[0]  # type: ignore[misc]
        if n in old_sizes:
            row["per_key_lookup"] = timed(lambda t=text: per_key_lookup(t), 1)[0]  # type: ignore[misc]
        rows.append(row)
    return rows


def traced_peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_string(size: int) -> dict[str, Any]:
    line = 'p: Lamp(name = "' + "a" * size + '")'
    token = line[line.index('"'):-1]
    parse_profile_text('p: Lamp(name = "a")')  # build the parser outside the measurement
    limits = ProfileLimits(max_line=2 * size, max_string=2 * size)
    new_pattern = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
    return {
        "bytes": size,
        "old_pattern_bytes_per_byte": traced_peak(lambda: OLD_STRING.match(token)) / size,
        "new_pattern_bytes_per_byte": traced_peak(lambda: new_pattern.match(token)) / size,
        "parse_profile_bytes_per_byte":
            traced_peak(lambda: parse_profile_text(line, limits=limits)) / size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, one repeat")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    load0 = os.getloadavg()
    events = bench_events(300 if args.quick else 3000, repeat)
    sizes = [1000, 2000, 10_000] if args.quick else [1000, 2000, 4000, 10_000]
    schemas = bench_schemas(sizes, {1000, 2000} if args.quick else {1000, 2000, 4000},
                            repeat)
    string = bench_string(1_000_000 if args.quick else 4_000_000)
    result = {"events": events, "schemas": schemas, "string": string,
              "loadavg_start": load0, "loadavg_end": os.getloadavg(), "repeat": repeat}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    e = events
    print(f"## Reading event files ({e['events']:,} events, {e['bytes'] / 2**20:.1f} MiB)\n")
    print("| reader | seconds | CPU s | events/s |\n|---|---|---|---|")
    for key, label in (("read_events", "read_events (hardened)"),
                       ("plain_loop", "plain loop (before, baseline)")):
        r = e[key]
        print(f"| {label} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
              f"{r['events_per_s']:,.0f} |")
    print(f"\nread_events / plain loop: {e['ratio']:.2f}x the wall time, "
          f"{e['cpu_ratio']:.2f}x the CPU time\n")
    print("## Schemas of many types (seconds)\n")
    print("| types | parse_schema | tomllib alone (floor) | per-key line lookup (before) |")
    print("|---|---|---|---|")
    for r in schemas:
        old = f"{r['per_key_lookup']:.2f}" if "per_key_lookup" in r else "-"
        print(f"| {r['types']:,} | {r['parse_schema']:.2f} | {r['tomllib_only']:.2f} | {old} |")
    s = string
    print(f"\n## A {s['bytes'] / 1e6:.0f} MB quoted string in a profile "
          "(peak traced bytes per input byte)\n")
    print("| | bytes per byte |\n|---|---|")
    print(f"| old STRING pattern (baseline) | {s['old_pattern_bytes_per_byte']:.1f} |")
    print(f"| new STRING pattern | {s['new_pattern_bytes_per_byte']:.1f} |")
    print(f"| whole profile parse (new) | {s['parse_profile_bytes_per_byte']:.1f} |")
    print(f"\nload average: {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
