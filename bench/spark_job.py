"""The main job end to end: ``siftbus pipeline run`` beside ``siftbus match`` on the same
files in the same run, and the job on a standalone cluster of one and of two workers.

    python bench/spark_job.py --quick     # 10k profiles, 20k and 100k events, ~10 minutes
    python bench/spark_job.py             # 100k profiles, 100k and 2M events
    python bench/spark_job.py --no-cluster
    python bench/spark_job.py --no-cluster --baseline-src /tmp/main/src   # in turns with main

Mixed workload (issue 33, after the matching-core issue's): 10 event types with 10 int
attributes (0..999), a location string ``s0`` and an enum ``s1``; profiles of 2-5 integer
conditions, one in three also with a string condition (``prefix``, a set, ``!=``, a quoted
enum label); seeded. Both commands are run as a user runs them (a fresh process, start-up,
reading, writing included); CPU is the whole process tree (driver, JVM, Python workers),
sampled from /proc, so other people's load on the shared machine changes wall times but not
CPU seconds. From two input sizes the table derives the job's fixed cost (session start,
compiling and broadcasting the index) and its cost per event. Every run's matches.jsonl
must equal ``siftbus match``'s byte for byte.

The scale-out rows start a standalone master and 1 or 2 workers of one core each
(``siftbus.spark.standalone``) and run the same job with ``--master spark://...``;
throughput is events per second of the job's own time (its summary table), which a
machine with other work on its 2 cores caps: the load is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def write_mixed(directory: Path, n_profiles: int, n_events: int, seed: int = 7) -> None:
    """The mixed workload's schema, profiles and events (skipped when already there)."""
    directory.mkdir(parents=True, exist_ok=True)
    done = directory / ".done"
    if done.exists():
        return
    rnd = random.Random(seed)
    labels = ",".join(f"c{i}" for i in range(20))
    (directory / "schema.toml").write_text("".join(
        f"[T{t}]\n" + "".join(f'i{a} = "int[0,999]"\n' for a in range(10))
        + f's0 = "string"\ns1 = "enum[{labels}]"\n\n' for t in range(10)))

    def loc() -> str:
        return f"b{rnd.randrange(10)}/f{rnd.randrange(5)}/r{rnd.randrange(30):02d}"

    with open(directory / "profiles.txt", "w") as f:
        for p in range(n_profiles):
            conds = []
            for a in rnd.sample(range(10), rnd.randint(2, 5)):
                op, v = rnd.choice(["=", "<", ">", "in"]), rnd.randrange(1, 999)
                conds.append(f"i{a} in [{v}, {min(999, v + rnd.randrange(100))}]" if op == "in"
                             else f"i{a} {op} {v}")
            if p % 3 == 0:
                k = rnd.randrange(4)
                conds.append([f's0 prefix "b{rnd.randrange(10)}/f{rnd.randrange(5)}/"',
                              "s0 in {" + ", ".join(f'"{loc()}"' for _ in range(3)) + "}",
                              f's0 != "{loc()}"', f's1 = "c{rnd.randrange(20)}"'][k])
            f.write(f"p{p}@u{p % 100}: T{rnd.randrange(10)}({', '.join(conds)})\n")
    with open(directory / "events.jsonl", "w") as f:
        for _ in range(n_events):
            d: dict[str, Any] = {"type": f"T{rnd.randrange(10)}"}
            d.update((f"i{a}", rnd.randrange(1000)) for a in range(10))
            d["s0"], d["s1"] = loc(), f"c{rnd.randrange(20)}"
            f.write(json.dumps(d) + "\n")
    done.touch()


def sample_tree(cmd: list[str], sample: Callable[[list[Any]], None], *, every: float = 0.1,
                timeout: float = 3600, env: dict[str, str] | None = None
                ) -> tuple[float, str, list[float]]:
    """Run ``cmd``, calling ``sample`` with its process tree (psutil processes) every
    ``every`` seconds; (wall s, stdout, load averages seen). Raises on a timeout or a
    non-zero exit."""
    import threading

    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    root = psutil.Process(proc.pid)
    loads = []
    out_chunks: list[str] = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read() or ""),
                              daemon=True)
    reader.start()
    while proc.poll() is None:
        if time.perf_counter() - start > timeout:
            proc.kill()
            raise RuntimeError(f"timed out: {cmd}")
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        sample(procs)
        loads.append(os.getloadavg()[0])
        time.sleep(every)
    reader.join(timeout=10)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} exited {proc.returncode}")
    return wall, "".join(out_chunks), loads


def run_tree(cmd: list[str], timeout: float = 3600, src: Path | None = None
             ) -> tuple[float, float, str, float]:
    """Run ``cmd`` (with ``src`` first on its PYTHONPATH when given); (wall s, CPU s of its
    process tree, stdout, median load)."""
    import psutil

    seen: dict[int, float] = {}

    def cpu(procs: list[Any]) -> None:
        for p in procs:
            try:
                t = p.cpu_times()
                seen[p.pid] = t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass

    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    wall, out, loads = sample_tree(cmd, cpu, timeout=timeout, env=env)
    return wall, sum(seen.values()), out, statistics.median(loads or [0.0])


def job_seconds(stdout: str) -> float:
    """The job's own time from the pipeline's summary table."""
    m = re.search(r"seconds\s*\S\s*([\d.]+)", stdout)
    return float(m[1]) if m else float("nan")


def measure(data: Path, out: Path, master: str, repeats: int,
            baseline: Path | None = None) -> dict[str, Any]:
    """Medians of ``siftbus match`` and ``siftbus pipeline run`` on one workload; with
    ``baseline`` (another checkout's ``src``) also its pipeline, in turns with this one."""
    n = (data / "events.jsonl").read_bytes().count(b"\n")
    common = ["--schema", str(data / "schema.toml"), "--profiles", str(data / "profiles.txt"),
              "--events", str(data / "events.jsonl")]
    rows: dict[str, list[tuple[float, float, float, float]]] = {"match": [], "pipeline": []}
    pipelines = [("pipeline", None)] + ([("baseline", baseline)] if baseline else [])
    for _ in range(repeats):
        wall, cpu, _, load = run_tree([str(BIN / "siftbus"), "match", *common, "--out",
                                       str(out / "m.jsonl")])
        rows["match"].append((wall, cpu, wall, load))
        for name, src in pipelines:
            wall, cpu, text, load = run_tree([str(BIN / "siftbus"), "pipeline", "run", *common,
                                              "--out", str(out / "p"), "--master", master,
                                              "--no-progress"], src=src)
            rows.setdefault(name, []).append((wall, cpu, job_seconds(text), load))
            if (out / "p" / "matches.jsonl").read_bytes() != (out / "m.jsonl").read_bytes():
                raise AssertionError(f"the {name}'s matches differ from siftbus match's")
    res: dict[str, Any] = {"events": n}
    for k, v in rows.items():
        res[k] = {name: statistics.median(x[i] for x in v)
                  for i, name in enumerate(("wall", "cpu", "job", "load"))}
    return res


def scale_out(data: Path, out: Path, workers: int, repeats: int,
              partition: str = "16m") -> dict[str, Any]:
    """The job on a standalone cluster of ``workers`` one-core workers; ``partition`` is
    Spark's maxPartitionBytes (the input must give several tasks per worker, or the
    largest one decides the time)."""
    from siftbus.spark.standalone import StandaloneCluster

    cfg = out / f"cluster{workers}.toml"
    cfg.write_text(f'[spark]\nshuffle_partitions = {2 * workers}\n\n[spark.conf]\n'
                   f'"spark.executor.memory" = "1g"\n"spark.cores.max" = "{workers}"\n'
                   '"spark.sql.files.maxPartitionBytes" = "' + partition + '"\n')
    jobs, loads = [], []
    with StandaloneCluster(workers=workers, cores=1, memory="1500m") as url:
        for _ in range(repeats):
            _, _, text, load = run_tree([
                str(BIN / "siftbus"), "pipeline", "run", "--schema", str(data / "schema.toml"),
                "--profiles", str(data / "profiles.txt"), "--events",
                str(data / "events.jsonl"), "--out", str(out / f"c{workers}"), "--master", url,
                "--config", str(cfg), "--no-progress"])
            jobs.append(job_seconds(text))
            loads.append(load)
    return {"workers": workers, "job": statistics.median(jobs), "load": statistics.median(loads)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profiles", type=int, default=None)
    ap.add_argument("--events", default=None, help="two sizes, e.g. 100000,2000000")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="another checkout's src/ (e.g. main's, from git archive): its "
                         "pipeline measured in turns with this one")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "siftbus-bench")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "spark_job.json")
    a = ap.parse_args()
    profiles = a.profiles or (10_000 if a.quick else 100_000)
    small, large = (int(x) for x in (a.events or ("20000,100000" if a.quick
                                                   else "100000,2000000")).split(","))
    repeats = a.repeats or (1 if a.quick else 3)
    results: dict[str, Any] = {"profiles": profiles, "master": a.master, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for n in (small, large):
            data = a.data / f"mixed-{profiles}-{n}"
            write_mixed(data, profiles, n)
            results["sizes"][n] = measure(data, out, a.master, repeats, a.baseline_src)
        s, g = results["sizes"][small], results["sizes"][large]
        kinds = ("match", "pipeline") + (("baseline",) if a.baseline_src else ())
        for k in kinds:
            per_event = (g[k]["cpu"] - s[k]["cpu"]) / (large - small)
            results[k] = {"cpu_per_event_us": per_event * 1e6,
                          "events_per_cpu_s": 1 / per_event if per_event > 0 else float("inf"),
                          "fixed_cpu_s": s[k]["cpu"] - small * per_event}
        for k in kinds[1:]:
            results[f"ratio_{k}"] = results[k]["events_per_cpu_s"] / results["match"][
                "events_per_cpu_s"]
        results["ratio"] = results["ratio_pipeline"]
        if not a.no_cluster:
            data = a.data / f"mixed-{profiles}-{large}"
            results["cluster"] = [scale_out(data, out, w, repeats) for w in (1, 2)]
            one, two = results["cluster"]
            results["speedup"] = one["job"] / two["job"]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(results, indent=1))
    print(f"mixed workload, {profiles:,} profiles, {a.master}\n")
    print("| events | command | wall s | CPU s (tree) | events/CPU-s | load |")
    print("|---:|---|---:|---:|---:|---:|")
    for n, r in results["sizes"].items():
        for k in kinds:
            print(f"| {n:,} | siftbus {k} | {r[k]['wall']:.1f} | {r[k]['cpu']:.1f} | "
                  f"{n / r[k]['cpu']:,.0f} | {r[k]['load']:.1f} |")
    print()
    for k in kinds:
        r = results[k]
        print(f"* {k}: {r['cpu_per_event_us']:.1f} CPU-us per event "
              f"({r['events_per_cpu_s']:,.0f} events/CPU-s), fixed cost {r['fixed_cpu_s']:.1f} "
              "CPU-s")
    for k in kinds[1:]:
        print(f"* {k} / match, per event: {results[f'ratio_{k}']:.2f} (target >= 0.33)")
    if "cluster" in results:
        for c in results["cluster"]:
            print(f"* standalone cluster, {c['workers']} worker(s) of 1 core: job "
                  f"{c['job']:.1f} s ({large / c['job']:,.0f} events/s), load {c['load']:.1f}")
        print(f"* 2 workers / 1 worker: {results['speedup']:.2f}x (target >= 1.7)")


if __name__ == "__main__":
    main()
