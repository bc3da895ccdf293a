"""``siftbus match`` end to end on the EventBridge-style workload, this checkout against
another one, in turns (issue 31, item 8).

    python bench/eventbridge_cli.py --baseline /tmp/main/src            # 1,000,000 events
    python bench/eventbridge_cli.py --baseline /tmp/main/src --quick    # 100,000 events

The workload is ``bench/eventbridge.py``'s (100,000 rules, ten matches per event), with
and without the ``name like "*-myapp-*"`` wildcard. For each source tree, in turns (so
both see the same load), three child processes are timed in CPU seconds (user + system):

* ``siftbus match`` over the whole event file (start-up, rule file, events, output);
* the same over a file of one event: start-up and reading the 100,000 rule lines;
* ``siftbus patterns import`` of the same rules (without the wildcard: with it the file
  passes the command's 16 MiB) as 100,000 EventBridge JSON patterns.

Medians of ``--runs`` turns, the load average beside them; writes
``bench/results/eventbridge_cli.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from eventbridge import MODULO, RULES, SCHEMA_TOML, event_line, rule_text  # noqa: E402


def pattern_line(i: int, wildcard: bool) -> str:
    """Rule ``i`` as an EventBridge pattern line (the same conditions; the type is given
    by ``--type``, and the JSON is compact: the command reads files up to 16 MiB)."""
    pattern: dict[str, Any] = {
        "env": ["prod"], "number": [str(i % MODULO)],
        "tags": ["tag1"], "region": [{"anything-but": "moon"}], "kind": ["app", "database"]}
    if wildcard:
        pattern["name"] = [{"wildcard": "*-myapp-*"}]
    return json.dumps({"id": f"r{i}", "pattern": pattern}, separators=(",", ":"))


def child_cpu(args: list[str], src: str) -> float:
    """CPU seconds of ``python -m siftbus ARGS`` run with ``src`` first on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "siftbus", *args], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": src})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True, help="another checkout's src directory")
    ap.add_argument("--quick", action="store_true", help="100,000 events, not 1,000,000")
    ap.add_argument("--runs", type=int, default=3, help="turns (the median is reported)")
    ap.add_argument("--light", action="store_true",
                    help="the rule file alone without the wildcard only, patterns once")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "eventbridge_cli.json")
    args = ap.parse_args()
    n_events = 100_000 if args.quick else 1_000_000
    trees = {"baseline": args.baseline, "this checkout": str(ROOT / "src")}
    runs: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="siftbus-eventbridge-cli-") as d:
        tmp = Path(d)
        schema = tmp / "schema.toml"
        schema.write_text(SCHEMA_TOML)
        events, one = tmp / "events.jsonl", tmp / "one.jsonl"
        with open(events, "w") as f:
            f.writelines(event_line(i) + "\n" for i in range(n_events))
        one.write_text(event_line(0) + "\n")
        for w in (False, True):
            (tmp / f"rules{w:d}.txt").write_text(
                "".join(rule_text(i, w) + "\n" for i in range(RULES)))
        (tmp / "patterns0.jsonl").write_text(
            "".join(pattern_line(i, False) + "\n" for i in range(RULES)))
        for turn in range(args.runs):
            for w in (False, True):
                rules = str(tmp / f"rules{w:d}.txt")
                match = ["match", "--schema", str(schema), "--profiles", rules,
                         "--out", os.devnull, "--events"]
                for name, src in trees.items():
                    r = runs.setdefault(f"{name}, {'with' if w else 'without'} wildcard", {})
                    r.setdefault("load", []).append(os.getloadavg()[0])
                    r.setdefault("match_cpu_s", []).append(child_cpu([*match, str(events)], src))
                    if w and args.light:
                        continue
                    r.setdefault("rules_only_cpu_s", []).append(
                        child_cpu([*match, str(one)], src))
                    # with the wildcard the file passes the command's 16 MiB
                    if not w and (turn == 0 or not args.light):
                        r.setdefault("patterns_import_cpu_s", []).append(child_cpu(
                            ["patterns", "import", str(tmp / "patterns0.jsonl"), "--schema",
                             str(schema), "--type", "Ev"], src))
                    print(turn, name, w, {k: round(v[-1], 2) for k, v in r.items()},
                          file=sys.stderr, flush=True)
    results = {}
    rows = ["| tree | rules | `siftbus match` (CPU s) | events/CPU-s | rule file only "
            "(CPU s) | `patterns import` 100k (CPU s) | load |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for key, r in runs.items():
        med = {k: statistics.median(v) for k, v in r.items() if k != "load"}
        med.setdefault("patterns_import_cpu_s", float("nan"))
        med.setdefault("rules_only_cpu_s", float("nan"))
        med["events_per_cpu_s"] = n_events / med["match_cpu_s"]
        results[key] = {**med, "runs": r}
        name, rules = key.split(", ")
        rows.append(f"| {name} | {rules} | {med['match_cpu_s']:.1f} | "
                    f"{med['events_per_cpu_s']:,.0f} | {med['rules_only_cpu_s']:.1f} | "
                    f"{med['patterns_import_cpu_s']:.1f} | {min(r['load']):.1f}-"
                    f"{max(r['load']):.1f} |")
    text = f"100,000 rules, {n_events:,} events, medians of {args.runs}\n\n" + "\n".join(rows)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"events": n_events, "rules": RULES, "runs": args.runs,
                                    "trees": trees, "results": results, "table": text},
                                   indent=2) + "\n")


if __name__ == "__main__":
    main()
