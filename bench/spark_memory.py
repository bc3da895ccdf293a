"""Memory per executor with a large subscription set (issue 33, target 3): the resident
memory of the JVM and of the Python workers while ``siftbus pipeline run`` matches events
against 1M profiles, and the size of what is broadcast.

    python bench/spark_memory.py                       # 1M mixed profiles, 100k events
    python bench/spark_memory.py --profiles 100000     # the same at 100k, as the baseline

What the executors receive is the compiled index (a
:class:`~siftbus.match.index.CompiledIndex`: numpy arrays of cells, sets and records),
pickled once by the driver and shipped once per executor by Spark's broadcast; no profile
text is parsed on a worker. The table gives its pickled size beside the profile file's.
The job runs as a user runs it (``--master local[2]``: one JVM that is driver and
executor, a Python daemon that forks the workers); peak RSS is sampled every 0.2 s per
process, and for the Python workers also the USS (pages of their own: a forked worker
shares the daemon's). The baseline in the same run is the same job at a tenth of the
profiles.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

from spark_job import job_seconds, sample_tree, write_mixed

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def broadcast_bytes(data: Path) -> int:
    """The pickled size of the plan the driver broadcasts for these profiles."""
    from siftbus.model import load_schema
    from siftbus.spark.subscriptions import ProfileFile, SubscriptionSet

    subs = SubscriptionSet(load_schema(data / "schema.toml"), ProfileFile(data / "profiles.txt"))
    return len(pickle.dumps(subs.plan(), protocol=pickle.HIGHEST_PROTOCOL))


def _role(p: Any, root: int) -> str:
    if p.pid == root:
        return "driver"
    name = p.name()
    if name == "java" or name.startswith("java"):
        return "jvm"
    cmd = " ".join(p.cmdline())
    return "python worker" if "pyspark" in cmd or "daemon" in cmd or "worker" in cmd \
        else "other"


def run_sampled(cmd: list[str], timeout: float = 3600) -> tuple[dict[str, Any], str]:
    """Run ``cmd``; peak RSS (and USS for workers) per role, and its stdout."""
    import psutil

    peak: dict[int, tuple[str, int, int]] = {}

    def memory(procs: list[Any]) -> None:  # procs[0] is the command's own process
        for p in procs:
            try:
                role = _role(p, procs[0].pid)
                rss = p.memory_info().rss
                uss = p.memory_full_info().uss if role == "python worker" else 0
            except psutil.Error:
                continue
            _, r0, u0 = peak.get(p.pid, (role, 0, 0))
            peak[p.pid] = (role, max(r0, rss), max(u0, uss))

    wall, text, loads = sample_tree(cmd, memory, every=0.2, timeout=timeout)
    out: dict[str, Any] = {"wall": wall,
                           "load": sorted(loads)[len(loads) // 2] if loads else 0.0}
    for role in ("driver", "jvm", "python worker"):
        rows = [(r, u) for k, r, u in peak.values() if k == role]
        out[role] = {"processes": len(rows), "peak_rss_mb": max((r for r, _ in rows),
                                                                default=0) / 2**20,
                     "peak_uss_mb": max((u for _, u in rows), default=0) / 2**20}
    return out, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", default="100000,1000000")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "siftbus-bench")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "spark_memory.json")
    a = ap.parse_args()
    rows = []
    for n in (int(x) for x in a.profiles.split(",")):
        data = a.data / f"mixed-{n}-{a.events}"
        write_mixed(data, n, a.events)
        size = broadcast_bytes(data)
        with tempfile.TemporaryDirectory() as tmp:
            res, text = run_sampled([
                str(BIN / "siftbus"), "pipeline", "run", "--schema", str(data / "schema.toml"),
                "--profiles", str(data / "profiles.txt"), "--events",
                str(data / "events.jsonl"), "--out", tmp, "--master", a.master,
                "--no-progress"])
        rows.append({"profiles": n, "events": a.events, "broadcast_mb": size / 2**20,
                     "profile_text_mb": (data / "profiles.txt").stat().st_size / 2**20,
                     "job": job_seconds(text), **res})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"master": a.master, "rows": rows}, indent=1))
    print(f"siftbus pipeline run, mixed workload, {a.events:,} events, {a.master}\n")
    print("| profiles | profile text MB | broadcast MB | JVM peak RSS MB | Python worker peak "
          "RSS MB (USS) | workers | driver peak RSS MB | job s | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        w = r["python worker"]
        print(f"| {r['profiles']:,} | {r['profile_text_mb']:.0f} | {r['broadcast_mb']:.0f} | "
              f"{r['jvm']['peak_rss_mb']:.0f} | {w['peak_rss_mb']:.0f} "
              f"({w['peak_uss_mb']:.0f}) | {w['processes']} | "
              f"{r['driver']['peak_rss_mb']:.0f} | {r['job']:.1f} | {r['load']:.1f} |")


if __name__ == "__main__":
    main()
