"""Streaming latency and sustained throughput of ``siftbus pipeline stream`` (issue 33,
target 4), over a watched directory and over a socket, at a 1 s trigger.

    python bench/spark_stream.py --quick    # 1k profiles, one phase per mode, ~3 minutes
    python bench/spark_stream.py            # 10k profiles, rates 500, 2000, 8000 events/s

The stream runs as a user runs it (``siftbus pipeline stream --trigger 1
--deliver-broker``, a fresh process) against a broker in this process; a subscriber of
that broker times every event from its arrival (the file renamed into the watched
directory, the line sent on the socket) to its delivery (``siftbus.spark.latency``).
Every event matches the profile ``all@ops`` besides its share of the random ones, so
every event is delivered once. Each phase offers a steady rate (two sends a second) for
a fixed time and is drained before the next; ``events/s`` is delivered events over first
arrival to last delivery, which equals the offered rate while the stream keeps up and
falls behind it (with a growing p99) when it does not. The baseline in the same run is
the trigger itself: no event can be delivered sooner than the next trigger, so the p50
of a stream that keeps up is about half the trigger plus one batch's time. The load of
the shared machine is printed beside every row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from siftbus.spark.latency import StreamWorkload, measure_stream

HERE = Path(__file__).resolve().parent

SCHEMA = """[Reading]
seq = "int[0,1000000000]"
room = "int[0,99]"
value = "int[0,999]"
kind = "enum[temp,humidity,co2,door]"
"""


def workload(profiles: int, seed: int = 11) -> StreamWorkload:
    rnd = random.Random(seed)
    kinds = ["temp", "humidity", "co2", "door"]
    lines = ["all@ops: Reading(seq >= 0)"]
    for p in range(profiles):
        lo = rnd.randrange(900)
        lines.append(f"p{p}@u{p % 50}: Reading(room = {rnd.randrange(100)}, "
                     f"value in [{lo}, {lo + rnd.randrange(100)}], "
                     f"kind = {rnd.choice(kinds)})")

    def line(seq: int) -> str:
        r = random.Random(seq)
        return json.dumps({"type": "Reading", "seq": seq, "room": r.randrange(100),
                           "value": r.randrange(1000), "kind": r.choice(kinds)})

    return StreamWorkload(SCHEMA, "\n".join(lines) + "\n", ("Reading(seq >= 0)",), line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profiles", type=int, default=None)
    ap.add_argument("--rates", default=None, help="events/s per phase, e.g. 1000,4000")
    ap.add_argument("--seconds", type=float, default=None, help="per phase")
    ap.add_argument("--modes", default="watch,socket")
    ap.add_argument("--trigger", type=float, default=1.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "spark_stream.json")
    a = ap.parse_args()
    profiles = a.profiles or (1000 if a.quick else 10_000)
    rates = [float(x) for x in (a.rates or ("2000" if a.quick else "500,2000,8000"))
             .split(",")]
    seconds = a.seconds or (10.0 if a.quick else 15.0)
    load = workload(profiles)
    rows: list[dict[str, Any]] = []
    for mode in a.modes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            before = os.getloadavg()[0]
            results = measure_stream(Path(tmp), load, mode=mode,
                                     phases=[(r, seconds) for r in rates],
                                     trigger=a.trigger, master=a.master)
            after = os.getloadavg()[0]
            for r in results:
                rows.append({"mode": mode, "rate": r.rate, "events": r.events,
                             "delivered": r.delivered, "seconds": r.seconds,
                             "events_per_s": r.events_per_s, "p50": r.p50, "p99": r.p99,
                             "max": r.max, "spark_p50": r.spark_p50, "repeats": r.repeats,
                             "load": (before + after) / 2})
            if not results:
                print(f"{mode}: the stream stopped early; see its log", file=sys.stderr)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"profiles": profiles, "trigger": a.trigger,
                                 "master": a.master, "rows": rows}, indent=1))
    print(f"siftbus pipeline stream, {profiles:,} profiles, trigger {a.trigger:g} s, "
          f"{a.master}\n")
    print("| source | offered events/s | delivered | events/s sustained | p50 s | p99 s "
          "| max s | p50 to publish s | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['rate']:,.0f} | {r['delivered']:,}/{r['events']:,} | "
              f"{r['events_per_s']:,.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['max']:.2f} | "
              f"{r['spark_p50']:.2f} | {r['load']:.1f} |")


if __name__ == "__main__":
    main()
