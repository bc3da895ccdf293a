"""Scale-out of the main job on a Spark standalone cluster: one worker against two, on a
CPU-bound workload (issue 33, target 2).

    python bench/spark_scale.py                 # REIN, 100k profiles, 20k and 80k events
    python bench/spark_scale.py --profiles 20000 --events 5000,20000 --repeats 1

The workload is REIN's interval workload (bench/rein_workload.py's parameters: one type of
20 int attributes on [0, 1000000), each profile 10 of them with an interval of half the
domain), written as the files a user has: schema.toml, profiles.txt, events.jsonl. Matching
dominates each event's cost there, which is the case where more executors should pay.

A standalone master and 1 or 2 workers of one core each (``siftbus.spark.standalone``) run
``siftbus pipeline run --master spark://...`` at two event counts; the table gives the
job's own time (its summary table) and the throughput from the difference of the two
sizes, which leaves out the fixed cost every job pays once (session start, index compile
and broadcast, commit): that part does not shrink with workers and is stated beside it.
Every cluster run's matches.jsonl must equal ``siftbus match``'s byte for byte. The load
average is printed beside each row: on a machine with other work, two one-core workers
cannot both have a core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from spark_job import BIN, scale_out  # noqa: E402


def write_rein(directory: Path, subs: int, n_events: int, seed: int = 3) -> None:
    """REIN's workload as text files (skipped when already there)."""
    directory.mkdir(parents=True, exist_ok=True)
    if (directory / ".done").exists():
        return
    rnd = random.Random(seed)
    domain, dims, preds, width = 1_000_000, 20, 10, 500_000
    (directory / "schema.toml").write_text(
        "[R]\n" + "".join(f'a{i} = "int[0,{domain - 1}]"\n' for i in range(dims)))
    with open(directory / "profiles.txt", "w") as f:
        for p in range(subs):
            conds = []
            for a in sorted(rnd.sample(range(dims), preds)):
                x = rnd.randrange(domain - width)
                conds.append(f"a{a} in [{x}, {x + width - 1}]")
            f.write(f"p{p}@u{p % 100}: R({', '.join(conds)})\n")
    with open(directory / "events.jsonl", "w") as f:
        for _ in range(n_events):
            e: dict[str, Any] = {"type": "R"}
            e.update((f"a{i}", rnd.randrange(domain)) for i in range(dims))
            f.write(json.dumps(e) + "\n")
    (directory / ".done").touch()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--events", default="20000,80000", help="two sizes")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--partition", default="3m", help="maxPartitionBytes: tasks per worker")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "siftbus-bench")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "spark_scale.json")
    a = ap.parse_args()
    small, large = (int(x) for x in a.events.split(","))
    res: dict[str, Any] = {"profiles": a.profiles, "partition": a.partition, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for n in (small, large):
            data = a.data / f"rein-{a.profiles}-{n}"
            write_rein(data, a.profiles, n)
            subprocess.run([str(BIN / "siftbus"), "match", "--schema", str(data / "schema.toml"),
                            "--profiles", str(data / "profiles.txt"), "--events",
                            str(data / "events.jsonl"), "--out", str(out / "m.jsonl")],
                           check=True, stdout=subprocess.DEVNULL)
            for workers in (1, 2):
                row = scale_out(data, out, workers, a.repeats, a.partition)
                got = (out / f"c{workers}" / "matches.jsonl").read_bytes()
                if got != (out / "m.jsonl").read_bytes():
                    raise AssertionError(f"{workers} worker(s): matches differ from siftbus match")
                row["events"] = n
                res["rows"].append(row)
                print(row, f"load now {os.getloadavg()[0]:.1f}", flush=True)
    job = {(r["events"], r["workers"]): r for r in res["rows"]}
    print(f"\nREIN workload, {a.profiles:,} profiles x 10 conditions, width 0.5\n")
    print("| workers | events | job s | load |")
    print("|---:|---:|---:|---:|")
    for r in res["rows"]:
        print(f"| {r['workers']} | {r['events']:,} | {r['job']:.1f} | {r['load']:.1f} |")
    rate = {}
    for w in (1, 2):
        d = job[large, w]["job"] - job[small, w]["job"]
        rate[w] = (large - small) / d if d > 0 else float("nan")
        fixed = job[small, w]["job"] - small / rate[w]
        print(f"* {w} worker(s): {rate[w]:,.0f} events/s beyond the fixed part "
              f"({fixed:.1f} s per job); whole job at {large:,}: "
              f"{large / job[large, w]['job']:,.0f} events/s")
    res["speedup"] = rate[2] / rate[1]
    res["speedup_whole"] = job[large, 1]["job"] / job[large, 2]["job"]
    print(f"* 2 workers / 1 worker: {res['speedup']:.2f}x per event, "
          f"{res['speedup_whole']:.2f}x whole job at {large:,} (target >= 1.7)")
    print(f"* median load {statistics.median(r['load'] for r in res['rows']):.1f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
