"""The EventBridge-style workload of the hypermatch comparison suite (issue 31, item 8).

    python bench/eventbridge.py --quick   # 100,000 rules x 200,000 events (~3 minutes)
    python bench/eventbridge.py           # 100,000 rules x 1,000,000 events

Workload (SchwarzDigits/hypermatch ``_benchmark``: 100,000 rules, ten share each
``number``, so every event matches ten). Rule ``i``, in the profile language::

    r<i>: Ev(env = "prod", number = "<i % 10000>", tags = "tag1", tags = "tag2",
             region not in {"moon"}, kind in {"app", "database"}[, name like "*-myapp-*"])

and event ``i`` (JSON lines as a web service sends them)::

    {"type": "Ev", "name": "app-myapp-<i>", "env": "prod", "number": "<i % 10000>",
     "tags": ["tag1", "tag2"], "region": "earth", "kind": "app"}

The suite's ``type`` field is ``kind`` here (``type`` names the event type in siftbus);
``tags`` is ``array<string>`` and two conditions on it are hypermatch's ``allOf``;
``region`` is optional. Each figure is measured with and without the ``name`` wildcard:

* **add**: 100,000 built profiles added to an empty ``index`` engine (CPU seconds, median
  of 3), as a plain loop and with full collections deferred (``match/gcpause.py``, what
  the CLI's loader does); building them from conditions (``Profile.build``) and reading
  the rule file as ``siftbus match`` does (the profile grammar) are reported beside it;
* **bytes per rule**: what the adds allocate (tracemalloc) over the rules, and the
  compiled kernel's arrays;
* **per event**: ``JsonEventMatcher.match(line)`` (JSON text in, ids out) and
  ``matcher.match(Event.of(...))`` (the object API), beside a ``json.loads`` loop over
  the same lines, events per CPU-second (median of 3);
* **batch**: in process, warm: ``JsonEventMatcher.match_file_arrays`` (the file in,
  (event, profile) arrays out: what a batch user in the same process reads), and
  ``match_file`` with the CLI's JSON-lines writer to ``/dev/null``; the writer's own CPU
  (formatting the same chunks again) is reported beside; ``siftbus match`` as a child
  process, end to end (start-up, rule file, events, output), beside a ``json.loads`` loop
  over the same file; the CLI's share for reading the 100,000 rule lines is estimated
  from parsing 5,000 of them in process;
* **reference**: the rule-by-rule oracle on a few events.

Writes ``bench/results/eventbridge.json``; reports the load average beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

from siftbus.match.engines import make_matcher  # noqa: E402
from siftbus.match.gcpause import full_collections_deferred  # noqa: E402
from siftbus.match.open_batch import JsonEventMatcher  # noqa: E402
from siftbus.match.reference import ReferenceMatcher  # noqa: E402
from siftbus.model import Event, Profile, parse_schema  # noqa: E402
from siftbus.model.predicate import Op, Predicate  # noqa: E402

RULES = 100_000
RULE_SAMPLE = 5_000
"""Rule lines parsed in process to estimate the CLI's share for reading the rule file."""
MODULO = 10_000
SCHEMA_TOML = """[Ev]
name = "string"
env = "string"
number = "string"
tags = "array<string>"
region = "optional string"
kind = "string"
"""
TARGETS = {"batch_events_per_cpu_s": 1_000_000, "per_event_events_per_cpu_s": 300_000,
           "wildcard_keeps": 0.75, "add_100k_cpu_s": 1.0}
ANCHORS = {"Event Ruler": 281_000, "quamina": 33_000, "hypermatch": 1_900_000}
"""Published figures (hypermatch's README and suite, Apple M4 Max, one core)."""


def rule_text(i: int, wildcard: bool) -> str:
    name = ', name like "*-myapp-*"' if wildcard else ""
    return (f'r{i}: Ev(env = "prod", number = "{i % MODULO}", tags = "tag1", tags = "tag2", '
            f'region not in {{"moon"}}, kind in {{"app", "database"}}{name})')


def rule_predicates(i: int, wildcard: bool) -> list[Predicate]:
    preds = [Predicate("env", Op.EQ, ("prod",)), Predicate("number", Op.EQ, (str(i % MODULO),)),
             Predicate("tags", Op.EQ, ("tag1",)), Predicate("tags", Op.EQ, ("tag2",)),
             Predicate("region", Op.IN, ("moon",), negated=True),
             Predicate("kind", Op.IN, ("app", "database"))]
    if wildcard:
        preds.append(Predicate("name", Op.LIKE, ("*-myapp-*",)))
    return preds


def event_values(i: int) -> dict[str, Any]:
    return {"name": f"app-myapp-{i}", "env": "prod", "number": str(i % MODULO),
            "tags": ["tag1", "tag2"], "region": "earth", "kind": "app"}


def event_line(i: int) -> str:
    return json.dumps({"type": "Ev", **event_values(i)})


def cpu() -> float:
    return time.process_time()


def load() -> float:
    return os.getloadavg()[0]


def median_of(runs: int, fn: Any) -> tuple[float, list[float]]:
    got = [fn() for _ in range(runs)]
    return statistics.median(got), got


def measure(wildcard: bool, n_events: int, per_event: int, runs: int, tmp: Path,
            events_path: Path) -> dict[str, Any]:
    schema = parse_schema(SCHEMA_TOML)
    etype = schema.get("Ev")
    assert etype is not None
    out: dict[str, Any] = {"wildcard": wildcard, "load_before": load()}

    t = cpu()
    profiles = [Profile.build(f"r{i}", etype, rule_predicates(i, wildcard))
                for i in range(RULES)]
    out["build_cpu_s"] = cpu() - t

    def add_all() -> float:
        m = make_matcher("index")
        t0 = cpu()
        for p in profiles:
            m.add(p)
        return cpu() - t0

    out["add_cpu_s"], out["add_runs"] = median_of(runs, add_all)

    def add_deferred() -> float:  # the project's bulk-load practice (match/gcpause.py)
        with full_collections_deferred():
            return add_all()

    out["add_cpu_s_full_collections_deferred"], _ = median_of(runs, add_deferred)
    matcher = make_matcher("index")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for p in profiles:
        matcher.add(p)
    out["bytes_per_rule_index"] = (tracemalloc.get_traced_memory()[0] - before) / RULES
    tracemalloc.stop()
    jm = JsonEventMatcher(matcher, schema, compiled=True)
    t = cpu()
    prog = jm.program()
    out["compile_cpu_s"] = cpu() - t
    assert prog is not None and prog.types == {"Ev"}
    out["bytes_per_rule_kernel"] = (prog.prog.nbytes + prog.pbytes.nbytes) / RULES

    lines = [event_line(i) for i in range(per_event)]
    values = [event_values(i) for i in range(per_event)]
    assert all(len(jm.match(s)) == 10 for s in lines[:100])

    def json_api() -> float:
        t0 = cpu()
        for s in lines:
            jm.match(s)
        return per_event / (cpu() - t0)

    def object_api() -> float:
        t0 = cpu()
        for v in values:
            matcher.match(Event.of(etype, v))
        return per_event / (cpu() - t0)

    def loads_loop() -> float:
        t0 = cpu()
        for s in lines:
            json.loads(s)
        return per_event / (cpu() - t0)

    out["per_event_json_api"], _ = median_of(runs, json_api)
    out["per_event_object_api"], _ = median_of(runs, object_api)
    out["per_event_json_loads"], _ = median_of(runs, loads_loop)
    out["load_per_event"] = load()

    from siftbus.cli.match import JsonLinesWriter

    def batch() -> float:
        n = matches = 0
        with open(os.devnull, "w") as sink:
            writer = JsonLinesWriter(sink)
            t0 = cpu()
            for chunk in jm.match_file(events_path):
                if chunk.rows is not None:
                    writer.write_rows(chunk.first, chunk.rows)
                    matches += sum(map(len, chunk.rows))
                else:
                    writer.write_csr(chunk.first, chunk.offsets, chunk.profiles,
                                     chunk.ids)  # type: ignore[arg-type]
                    matches += int(chunk.offsets[-1])
                n += chunk.n
            spent = cpu() - t0
        assert n == n_events and matches == 10 * n_events, (n, matches)
        return n / spent

    def loads_file() -> float:
        t0 = cpu()
        with open(events_path, "rb") as f:
            for raw in f:
                json.loads(raw)
        return n_events / (cpu() - t0)

    def arrays() -> float:
        n = matches = 0
        t0 = cpu()
        for got in file_arrays(jm, events_path):
            matches += len(got.events)
            n += got.n
        spent = cpu() - t0
        assert n == n_events and matches == 10 * n_events, (n, matches)
        return n / spent

    def writer_only() -> float:
        chunks = list(jm.match_file(events_path))
        with open(os.devnull, "w") as sink:
            writer = JsonLinesWriter(sink)
            t0 = cpu()
            for chunk in chunks:
                writer.write_csr(chunk.first, chunk.offsets, chunk.profiles,
                                 chunk.ids)  # type: ignore[arg-type]
            return cpu() - t0

    from siftbus.match import kernel

    kernel.compiled_for(events_path.stat().st_size)  # as `siftbus match` does: numba
    assert kernel.name() == "numba"  # writers, not the Python ones meant for small jobs
    batch()  # the kernel's code is loaded from numba's cache on the first call
    out["batch_arrays"], out["batch_arrays_runs"] = median_of(runs, arrays)
    out["batch_in_process"], out["batch_runs"] = median_of(runs, batch)
    out["json_lines_writer_cpu_s"], _ = median_of(runs, writer_only)
    out["batch_json_loads"], _ = median_of(runs, loads_file)
    out["load_batch"] = load()

    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    sample = [Event.of(etype, event_values(i)) for i in range(3)]
    t = cpu()
    assert all(len(ref.match(e)) == 10 for e in sample)
    out["reference_events_per_cpu_s"] = len(sample) / (cpu() - t)
    profiles.clear()  # what the child process needs is memory, not these
    ref = ReferenceMatcher()
    matcher = jm.matcher = make_matcher("index")

    rules_path = tmp / f"rules{int(wildcard)}.txt"
    with open(rules_path, "w") as f:
        f.writelines(rule_text(i, wildcard) + "\n" for i in range(RULES))
    schema_path = tmp / "schema.toml"
    schema_path.write_text(SCHEMA_TOML)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    # stdout to /dev/null, not `--out /dev/null`: older code renamed a temporary file over
    # the --out target, which replaced the device with a regular file (a baseline run)
    subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema", str(schema_path),
                    "--profiles", str(rules_path), "--events", str(events_path)],
                   check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["cli_cpu_s"] = child
    out["cli_wall_s"] = wall
    out["cli_events_per_cpu_s"] = n_events / child
    out["cli_peak_rss_mb"] = after.ru_maxrss / 1024
    from siftbus.lang.profile import parse_profile

    sample_lines = [rule_text(i, wildcard) for i in range(RULE_SAMPLE)]
    parse_profile(sample_lines[0], schema)  # the grammar is built once per process: not
    t = cpu()  # a per-line cost to scale up
    for text in sample_lines:  # the grammar, as the CLI reads these rules
        parse_profile(text, schema)
    out["rule_file_cpu_s"] = (cpu() - t) * RULES / RULE_SAMPLE
    out["cli_events_per_cpu_s_without_rule_file"] = n_events / max(
        child - out["rule_file_cpu_s"], 1e-9)
    out["load_after"] = load()
    return out


def file_arrays(jm: JsonEventMatcher, path: Path) -> Any:
    """``match_file_arrays``; on code from before it (a baseline run), the same pairs
    from ``match_file``'s CSR chunks."""
    if hasattr(jm, "match_file_arrays"):
        return jm.match_file_arrays(path)
    from types import SimpleNamespace

    import numpy as np

    return (SimpleNamespace(n=c.n, events=np.repeat(np.arange(c.first, c.first + c.n),
                                                    np.diff(c.offsets)))
            for c in jm.match_file(path))


def table(results: list[dict[str, Any]], n_events: int) -> str:
    rows = ["| rules | add 100k (CPU s; collections deferred) | bytes/rule (index + kernel) "
            "| per event: JSON API | per event: object API | json.loads loop "
            "| batch in process: arrays out | batch: JSON lines out (writer CPU s) "
            "| json.loads file | `siftbus match` end to end | reference | load |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(
            f"| {'with' if r['wildcard'] else 'without'} wildcard | {r['add_cpu_s']:.2f}; "
            f"{r['add_cpu_s_full_collections_deferred']:.2f} | "
            f"{r['bytes_per_rule_index']:.0f} + {r['bytes_per_rule_kernel']:.0f} | "
            f"{r['per_event_json_api']:,.0f} | {r['per_event_object_api']:,.0f} | "
            f"{r['per_event_json_loads']:,.0f} | {r['batch_arrays']:,.0f} | "
            f"{r['batch_in_process']:,.0f} ({r['json_lines_writer_cpu_s']:.2f}) | "
            f"{r['batch_json_loads']:,.0f} | {r['cli_events_per_cpu_s']:,.0f} "
            f"({r['cli_cpu_s']:.1f} CPU s, rule file {r['rule_file_cpu_s']:.1f}) | "
            f"{r['reference_events_per_cpu_s']:.2f} | {r['load_before']:.1f}-"
            f"{r['load_after']:.1f} |")
    return (f"100,000 rules, {n_events:,} events (batch), events per CPU-second\n\n"
            + "\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="200,000 events, not 1,000,000")
    ap.add_argument("--runs", type=int, default=3, help="repeats (the median is reported)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "eventbridge.json")
    args = ap.parse_args()
    n_events = 200_000 if args.quick else 1_000_000
    per_event = 20_000 if args.quick else 50_000
    results = []
    with tempfile.TemporaryDirectory(prefix="siftbus-eventbridge-") as d:
        tmp = Path(d)
        events_path = tmp / "events.jsonl"
        with open(events_path, "w") as f:
            f.writelines(event_line(i) + "\n" for i in range(n_events))
        for wildcard in (False, True):
            results.append(measure(wildcard, n_events, per_event, args.runs, tmp,
                                   events_path))
            print(json.dumps(results[-1]), file=sys.stderr)
    without, with_ = results
    summary = {
        "wildcard_keeps_per_event": with_["per_event_json_api"] / without["per_event_json_api"],
        "wildcard_keeps_batch": with_["batch_arrays"] / without["batch_arrays"],
        "wildcard_keeps_batch_json_lines": (with_["batch_in_process"]
                                            / without["batch_in_process"]),
    }
    text = table(results, n_events)
    print(text)
    print(f"\nwith the wildcard: {summary['wildcard_keeps_per_event']:.0%} per event, "
          f"{summary['wildcard_keeps_batch']:.0%} batch (arrays), "
          f"{summary['wildcard_keeps_batch_json_lines']:.0%} batch (JSON lines)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "workload": "hypermatch comparison suite, 100,000 rules, 10 matches per event",
        "events_batch": n_events, "events_per_event": per_event, "runs": args.runs,
        "machine": platform.platform(), "cpus": os.cpu_count(), "targets": TARGETS,
        "anchors_other_machine": ANCHORS, "results": results, "summary": summary,
        "table": text}, indent=2) + "\n")


if __name__ == "__main__":
    main()
