"""The mixed string workload (issue 29, items 3 and 9): ``siftbus match`` end to end beside
a plain ``json.loads`` loop over the same event file, in the same run.

    python bench/mixed.py --quick      # 100,000 profiles x 100,000 events (~1 minute)
    python bench/mixed.py              # and 100,000 profiles x 1,000,000 events

Workload (deterministic, seed 29): 10 event types ``M0..M9``, each with 10 int
attributes ``i0..i9`` on ``int[0,999]``, a location string ``s0`` (``"bB/fF/rRR"``:
10 buildings, 10 floors, 100 rooms) and an enum ``s1`` (``c0..c19``). One profile in
three carries a string or quoted condition: ``s0 prefix "b3/f0/"``,
``s0 in {"b0/f0/r02", ...}``, ``s0 != "..."`` or ``s1 = "c10"``; the rest are 1-4
int conditions (``=``, ``<``, ``>``, ``in [lo, hi]``, ``in {...}``) whose selectivity
aims at about 5 matches per event at 100,000 profiles. Events give every attribute,
uniformly.

For each size: the CPU seconds, wall seconds and peak RSS of the ``siftbus match``
child (JSON lines out), events per CPU-second, the same for the plain loop (the parent
reading the event file line by line with ``json.loads``), their ratio, and bytes per
condition (the child's peak RSS less its RSS on a 20-profile, 20-event run, over the
conditions written). Writes ``bench/results/mixed.json``; reports the load average.

``--compare SRC`` (a ``src`` directory of another checkout, say main's) runs that
checkout's ``siftbus match`` too, in turns with this one's and the loop, so that all
three see the same load. The children import the package with its bytecode compiled
first (``compileall``), as an installed package has it: compiling the sources again in
every run (``PYTHONDONTWRITEBYTECODE``) would add ~0.1 CPU-s that no user pays.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIFTBUS = [sys.executable, "-m", "siftbus"]
SEED = 29
TYPES = 10
INTS = 10
DOMAIN = 1000
LABELS = 20
TARGET_MATCHES = 5.0
TARGETS = {"cpu_over_json_loads_100k_x_100k": 4.0, "events_per_cpu_s_100k_x_1m": 200_000}


def schema_toml() -> str:
    out = []
    labels = ",".join(f"c{i}" for i in range(LABELS))
    for t in range(TYPES):
        out.append(f"[M{t}]")
        out += [f'i{a} = "int[0,{DOMAIN - 1}]"' for a in range(INTS)]
        out.append('s0 = "string"')
        out.append(f's1 = "enum[{labels}]"')
        out.append("")
    return "\n".join(out)


def location(rnd: random.Random) -> str:
    return f"b{rnd.randrange(10)}/f{rnd.randrange(10)}/r{rnd.randrange(100):02d}"


def _string_condition(rnd: random.Random) -> tuple[str, float]:
    """A string or quoted-enum condition and the share of events it accepts."""
    kind = rnd.randrange(4)
    if kind == 0:
        return f's0 prefix "b{rnd.randrange(10)}/f{rnd.randrange(10)}/"', 0.01
    if kind == 1:
        rooms = sorted({location(rnd) for _ in range(rnd.randint(1, 4))})
        return "s0 in {" + ", ".join(f'"{r}"' for r in rooms) + "}", len(rooms) / 10_000
    if kind == 2:
        return f's0 != "{location(rnd)}"', 1.0
    return f's1 = "c{rnd.randrange(LABELS)}"', 1 / LABELS


def _int_condition(rnd: random.Random, attr: int, share: float) -> str:
    """A condition on ``i<attr>`` accepting about ``share`` of the domain."""
    w = max(1, min(DOMAIN, round(share * DOMAIN)))
    if w == 1:
        return f"i{attr} = {rnd.randrange(DOMAIN)}"
    if w <= 5:
        vals = sorted(rnd.sample(range(DOMAIN), w))
        return f"i{attr} in {{{', '.join(map(str, vals))}}}"
    if w >= DOMAIN:
        return ""
    form = rnd.randrange(4)
    if form == 0:
        return f"i{attr} < {w}"
    if form == 1:
        return f"i{attr} > {DOMAIN - 1 - w}"
    x = rnd.randrange(DOMAIN - w + 1)
    return f"i{attr} in [{x}, {x + w - 1}]"


def profile_lines(n: int, seed: int = SEED) -> list[str]:
    """``n`` profile lines (ids ``m0..``); one in three has a string condition."""
    rnd = random.Random(seed)
    q = min(1.0, TARGET_MATCHES * TYPES / max(n, 1))
    lines = []
    for i in range(n):
        conds = []
        q_int = q
        if i % 3 == 0:
            text, share = _string_condition(rnd)
            conds.append(text)
            q_int = min(1.0, q / share)
        if q_int < 1.0:
            k = rnd.randint(1, 4)
            weights = [rnd.expovariate(1.0) for _ in range(k)]
            total = sum(weights)
            attrs = rnd.sample(range(INTS), k)
            for a, w in zip(attrs, weights, strict=True):
                c = _int_condition(rnd, a, math.exp(math.log(q_int) * w / total))
                if c:
                    conds.append(c)
        rnd.shuffle(conds)
        lines.append(f"m{i}: M{rnd.randrange(TYPES)}({', '.join(conds)})")
    return lines


def event_lines(n: int, seed: int = SEED + 1) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        ints = ", ".join(f'"i{a}": {rnd.randrange(DOMAIN)}' for a in range(INTS))
        out.append(f'{{"type": "M{rnd.randrange(TYPES)}", {ints}, '
                   f'"s0": "{location(rnd)}", "s1": "c{rnd.randrange(LABELS)}"}}')
    return out


def ensure_data(data: Path, sizes: list[tuple[int, int]]) -> dict[str, Path]:
    """The schema, profile and event files (written once, reused by later runs)."""
    data.mkdir(parents=True, exist_ok=True)
    paths = {"schema": data / "schema.toml"}
    if not paths["schema"].exists():
        paths["schema"].write_text(schema_toml())
    wanted = {("profiles", 20), ("events", 20)}
    for p, e in sizes:
        wanted |= {("profiles", p), ("events", e)}
    for kind, n in sorted(wanted):
        path = data / (f"profiles-{n}.txt" if kind == "profiles" else f"events-{n}.jsonl")
        if not path.exists():  # in a child, so that this process stays small
            subprocess.run([sys.executable, __file__, "--make", kind, str(n), "--to",
                            str(path)], check=True, cwd=ROOT)
        paths[f"{kind}-{n}"] = path
    return paths


def conditions(path: Path) -> int:
    """Conditions written in a profile file (commas inside sets not counted)."""
    total = 0
    with path.open() as f:
        for line in f:
            body = line[line.index("(") + 1:line.rindex(")")]
            depth = 0
            if body.strip():
                total += 1
            for ch in body:
                depth += ch in "{["
                depth -= ch in "}]"
                total += ch == "," and depth == 0
    return total


def child_env(src: Path | None) -> dict[str, str]:
    """The environment of a ``siftbus match`` child importing siftbus from ``src`` (else as
    this interpreter finds it), whose bytecode is compiled here first."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    where = subprocess.run([sys.executable, "-c", "import siftbus, os; "
                            "print(os.path.dirname(siftbus.__file__))"], env=env, check=True,
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=True, env={
        k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}, cwd=ROOT)
    return env


def child_run(cmd: list[str], env: dict[str, str] | None = None
              ) -> tuple[float, float, float]:
    """(cpu s, wall s, peak RSS MB) of one child process (its own rusage, by ``wait4``:
    ``RUSAGE_CHILDREN``'s peak is the largest of all children so far)."""
    w0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                         env=env)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - w0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[-2000:].decode(errors='replace')}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def json_loads_loop(path: Path) -> tuple[float, float]:
    """(cpu s, wall s) of reading the file line by line with ``json.loads``."""
    c0, w0 = time.process_time(), time.perf_counter()
    with path.open("rb") as f:
        for line in f:
            json.loads(line)
    return time.process_time() - c0, time.perf_counter() - w0


def run_size(paths: dict[str, Path], n_p: int, n_e: int, repeats: int, out: Path,
             base_rss: float, variants: list[tuple[str, dict[str, str]]]
             ) -> list[dict[str, Any]]:
    """One row per variant (``(label, child environment)``): each repeat runs every
    variant and then the loop, in turns, so that all see the same load."""
    cmd = [*SIFTBUS, "match", "--schema", str(paths["schema"]), "--profiles",
           str(paths[f"profiles-{n_p}"]), "--events", str(paths[f"events-{n_e}"]),
           "--out", str(out)]
    runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label, _ in variants}
    loops = []
    for _ in range(repeats):
        for label, env in variants:
            runs[label].append(child_run(cmd, env))
        loops.append(json_loads_loop(paths[f"events-{n_e}"]))
    base_cpu = statistics.median(x[0] for x in loops)
    with out.open() as f:
        matches = sum(len(json.loads(line)["matches"]) for line in f)
    n_cond = conditions(paths[f"profiles-{n_p}"])
    rows = []
    for label, _ in variants:
        rs = runs[label]
        cpu = statistics.median(r[0] for r in rs)
        peak = max(r[2] for r in rs)
        rows.append({
            "variant": label, "profiles": n_p, "events": n_e, "conditions": n_cond,
            "cpu_s": cpu, "cpu_s_runs": [r[0] for r in rs],
            "wall_s": statistics.median(r[1] for r in rs), "peak_rss_mb": peak,
            "events_per_cpu_s": n_e / cpu,
            "bytes_per_condition": max(0.0, peak - base_rss) * 2**20 / max(n_cond, 1),
            "json_loads_cpu_s": base_cpu, "json_loads_cpu_s_runs": [x[0] for x in loops],
            "json_loads_events_per_cpu_s": n_e / base_cpu,
            "cpu_over_json_loads": cpu / base_cpu, "matches_per_event": matches / n_e,
            "load": os.getloadavg()[0]})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| `siftbus match` | profiles x events | CPU s | events/CPU-s | wall s | peak RSS MB "
           "| bytes/condition | `json.loads` loop CPU s | events/CPU-s | ratio | matches/event "
           "| load |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(
            f"| {r['variant']} | {r['profiles']:,} x {r['events']:,} | {r['cpu_s']:.2f} | "
            f"{r['events_per_cpu_s']:,.0f} | {r['wall_s']:.2f} | {r['peak_rss_mb']:.0f} | "
            f"{r['bytes_per_condition']:.0f} | {r['json_loads_cpu_s']:.2f} | "
            f"{r['json_loads_events_per_cpu_s']:,.0f} | {r['cpu_over_json_loads']:.2f}x | "
            f"{r['matches_per_event']:.1f} | {r['load']:.1f} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 x 100,000 only")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TMPDIR", "/tmp")) / "siftbus-bench-mixed", help="where the input files are kept")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "mixed.json")
    ap.add_argument("--compare", type=Path, metavar="SRC",
                    help="also run the siftbus of this src directory (another checkout)")
    ap.add_argument("--make", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        kind, n = args.make[0], int(args.make[1])
        lines = profile_lines(n) if kind == "profiles" else event_lines(n)
        tmp = args.to.with_suffix(".part")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(args.to)
        return
    sizes = [(100_000, 100_000)] + ([] if args.quick else [(100_000, 1_000_000)])
    paths = ensure_data(args.data, sizes)
    out = args.data / "matches.jsonl"
    small = [*SIFTBUS, "match", "--schema", str(paths["schema"]), "--profiles",
             str(paths["profiles-20"]), "--events", str(paths["events-20"]), "--out", str(out)]
    variants = [("this checkout", child_env(None))]
    if args.compare is not None:
        variants.append((str(args.compare), child_env(args.compare.resolve())))
    warm = [*small[:7], str(paths[f"profiles-{sizes[0][0]}"]), *small[8:]]
    for _, env in variants:  # numba's caches made (or loaded once) before any timing
        child_run(warm, {**env, "SIFTBUS_KERNELS": "numba"})
    base_rss = min(child_run(small, variants[0][1])[2] for _ in range(2))
    rows = [row for p, e in sizes
            for row in run_size(paths, p, e, args.repeats, out, base_rss, variants)]
    md = table(rows)
    print(md)
    print(f"\nCPU time of the `siftbus match` child and of the loop (same run, alternating, "
          f"median of {args.repeats}); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; RSS of a 20 x 20 run: {base_rss:.0f} MB.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "mixed", "mode": "quick" if args.quick else "full", "seed": SEED,
        "targets": TARGETS,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg": os.getloadavg(), "platform": platform.platform(),
                    "kernels": os.environ.get("SIFTBUS_KERNELS") or "auto"},
        "results": rows, "base_rss_mb": base_rss, "table": md}, indent=2) + "\n")


if __name__ == "__main__":
    main()
