"""REIN's own benchmark: siftbus beside REIN and the plain loop, on the same data.

The workload (``bench/rein_workload.py``) is REIN's interval workload: 20 int attributes
on ``[0, 1000000)``, each subscription ``preds`` distinct attributes with an interval of
``width`` of the domain, each event all 20 attributes uniform; ``--zipf`` adds the
hot-spot variant (Zipf attributes and values). Every configuration runs in its own
worker process (so its peak RSS is its own):

* siftbus: ``IndexMatcher.add_columns`` (CPU s), batch matching of the events as key
  columns on the snapshot (``match_columns``, the path of ``siftbus match``; median of
  ``--repeats``), per-event ``match(event)`` on a sample (events built beforehand), the
  index's bytes per condition and the process's RSS; every match of ``--check`` events
  compared with a brute-force evaluation of every subscription (exact: no false
  positive or negative allowed);
* the plain loop: every subscription's conditions tested in Python, on a few events;
* REIN (``--rein DIR``: a checkout of xizeroplus/matching-algorithm's ``Rein`` folder,
  built here with ``g++ -O3`` into a temporary directory together with
  ``bench/rein_driver.cpp``), fed exactly the same subscriptions and events; its match
  counts are checked against siftbus's for every event.

Prints a markdown table and writes ``bench/results/rein.json``. ``--quick``: 100,000
subscriptions only (``bench/results/rein_quick.json``).
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
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rein_workload import Rein  # noqa: E402


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    """One configuration in this process: siftbus figures and the workload written for
    REIN (``cfg["data"]``, when given)."""
    from siftbus.match import kernel
    from siftbus.match.index import IndexMatcher
    from siftbus.model import Event

    kernel.use("numba")
    w = Rein(subs=cfg["subs"], preds=cfg["preds"], width=cfg["width"], zipf=cfg["zipf"])
    res: dict[str, Any] = {}
    base_rss = _rss_mb()
    t = time.process_time()
    cols = w.columns()
    res["generate_cpu_s"] = time.process_time() - t
    etype = cols.etype
    before = _rss_mb()
    t = time.process_time()
    m = IndexMatcher()
    m.add_columns(cols)
    res["load_cpu_s"] = time.process_time() - t
    del cols
    conds = w.subs * w.preds
    stats = m.stats()
    res["index_bytes_per_condition"] = stats.index_bytes / conds
    res["rss_after_load_mb"] = _rss_mb()
    res["rss_of_index_per_condition"] = (res["rss_after_load_mb"] - before) * 2**20 / conds
    ev = w.events(cfg["events"])
    columns = {f"a{i}": ev[:, i] for i in range(w.dims)}
    snap = m.snapshot()
    snap.match_columns("R", {k: v[:8] for k, v in columns.items()})  # compile the kernels
    cpus = []
    for _ in range(cfg["repeats"]):
        t = time.process_time()
        csr = snap.match_columns("R", columns)
        cpus.append(time.process_time() - t)
    res["batch_cpu_s"] = statistics.median(cpus)
    res["batch_ev_per_cpu_s"] = len(ev) / res["batch_cpu_s"]
    res["matches_per_event"] = csr.n_matches / len(ev)
    counts = np.diff(csr.offsets)
    names = [f"a{i}" for i in range(w.dims)]
    k = min(cfg["per_event"], len(ev))
    events = [Event.of(etype, dict(zip(names, row, strict=True))) for row in ev[:k].tolist()]
    m.match(events[0])
    cpus = []
    for _ in range(cfg["repeats"]):
        t = time.process_time()
        for e in events:
            m.match(e)
        cpus.append(time.process_time() - t)
    res["per_event_ev_per_cpu_s"] = k / statistics.median(cpus)
    res["peak_rss_mb"] = _peak_mb()  # before the checks' and the plain loop's own arrays
    # exactness: every match of the first events against the brute force
    attr, lo, hi = w.intervals()
    ids = snap.profile_ids
    for e in range(min(cfg["check"], len(ev))):
        want = w.brute(attr, lo, hi, ev[e])
        got = csr.profiles[csr.offsets[e]:csr.offsets[e + 1]]
        assert np.array_equal(want, got), f"event {e}: {len(got)} matches, {len(want)} true"
        if e < k:
            assert m.match(events[e]) == ids[want].tolist(), f"event {e}: match() differs"
    res["checked_events"] = min(cfg["check"], len(ev))
    # the plain loop: every subscription's conditions, in Python
    subs = [list(zip(a, x, y, strict=True)) for a, x, y in
            zip(attr.tolist(), lo.tolist(), hi.tolist(), strict=True)]
    n_loop = min(cfg["loop_events"], len(ev))
    t = time.process_time()
    for e in range(n_loop):
        vals = ev[e].tolist()
        hits = [i for i, s in enumerate(subs) if all(x <= vals[a] <= y for a, x, y in s)]
        assert len(hits) == counts[e]
    res["loop_ev_per_cpu_s"] = n_loop / (time.process_time() - t)
    del subs
    if cfg.get("data"):
        with open(cfg["data"], "wb") as f:
            np.array([w.subs, w.preds, w.dims, len(ev), w.domain], np.int32).tofile(f)
            np.stack([attr, lo, np.minimum(hi, w.domain - 1)], axis=2).astype(
                np.int32).tofile(f)
            ev.astype(np.int32).tofile(f)
        np.save(cfg["data"] + ".counts.npy", counts)
    res["rss_at_start_mb"] = base_rss
    return res


def build_rein(src: Path, out: Path) -> Path:
    """REIN's matcher and the driver, compiled into ``out``."""
    binary = out / "rein_driver"
    subprocess.run(["g++", "-O3", "-std=c++11", "-I", str(src), str(HERE / "rein_driver.cpp"),
                    str(src / "rein.cpp"), "-o", str(binary)], check=True)
    return binary


def run_rein(binary: Path, data: str) -> dict[str, Any]:
    proc = subprocess.Popen([str(binary), data], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"REIN driver failed ({proc.returncode})")
    res: dict[str, Any] = json.loads(text)
    res["peak_rss_mb"] = usage.ru_maxrss / 1024
    return res


def run_config(cfg: dict[str, Any], rein: Path | None, tmp: Path) -> dict[str, Any]:
    data = str(tmp / "workload.bin") if rein is not None else ""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps({**cfg, "data": data})],
                         check=True, capture_output=True, text=True, env=env)
    row: dict[str, Any] = {**cfg, "siftbus": json.loads(out.stdout.strip().splitlines()[-1]),
                           "load": os.getloadavg()[0]}
    if rein is not None:
        r = run_rein(rein, data)
        counts = np.load(data + ".counts.npy")
        r["counts_agree"] = bool(np.array_equal(np.array(r.pop("counts")), counts))
        r["ev_per_cpu_s"] = cfg["events"] / r["match_cpu_s"]
        r["ms_per_event"] = 1000 * r["match_cpu_s"] / cfg["events"]
        row["rein"] = r
        os.unlink(data)
        os.unlink(data + ".counts.npy")
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| subs | preds | width | shape | matches/ev | siftbus batch ev/CPU-s | per-event "
             "ev/CPU-s | REIN ev/CPU-s | batch x REIN | per-event x REIN | plain loop ev/s | "
             "load CPU-s | RSS MB (peak) | index B/cond | RSS B/cond | REIN RSS MB | exact | "
             "load avg |",
             "|" + "---:|" * 18]
    for r in rows:
        s = r["siftbus"]
        rn = r.get("rein")
        rein = rn["ev_per_cpu_s"] if rn else None
        lines.append(
            f"| {r['subs']:,} | {r['preds']} | {r['width']} | "
            f"{'zipf' if r['zipf'] else 'uniform'} | {s['matches_per_event']:.1f} | "
            f"{s['batch_ev_per_cpu_s']:,.0f} | {s['per_event_ev_per_cpu_s']:,.0f} | "
            + (f"{rein:,.0f} | {s['batch_ev_per_cpu_s'] / rein:.1f} | "
               f"{s['per_event_ev_per_cpu_s'] / rein:.1f} | " if rein else "- | - | - | ")
            + f"{s['loop_ev_per_cpu_s']:.2f} | {s['load_cpu_s']:.1f} | "
            f"{s['rss_after_load_mb']:,.0f} ({s['peak_rss_mb']:,.0f}) | "
            f"{s['index_bytes_per_condition']:.0f} | {s['rss_of_index_per_condition']:.0f} | "
            + (f"{rn['peak_rss_mb']:,.0f} | " if rn else "- | ")
            + f"{s['checked_events']} ev{', counts = REIN' if rn and rn['counts_agree'] else ''}"
            f" | {r['load']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--rein", type=Path, help="REIN's source folder (xizeroplus/"
                    "matching-algorithm/Rein)")
    ap.add_argument("--subs", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--preds", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--widths", type=float, nargs="+", default=[0.5, 0.1])
    ap.add_argument("--zipf", action="store_true", help="add the Zipf hot-spot variant")
    ap.add_argument("--events", type=int, default=2000, help="events at 100,000 subs "
                    "(scaled down by the subscription count above it)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, help="default bench/results/rein.json "
                    "(rein_quick.json with --quick)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    subs = [100_000] if args.quick else args.subs
    configs = [{"subs": s, "preds": p, "width": w, "zipf": False}
               for s in subs for w in args.widths for p in args.preds]
    if args.zipf:
        configs += [{"subs": s, "preds": 10, "width": 0.5, "zipf": True} for s in subs]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_rein(args.rein, Path(tmp)) if args.rein else None
        for cfg in configs:
            scale = max(1, cfg["subs"] // 100_000)
            cfg.update(events=max(200, args.events // scale), repeats=args.repeats,
                       per_event=max(100, 1000 // scale), check=20,
                       loop_events=max(1, 5 // scale))
            rows.append(run_config(cfg, binary, Path(tmp)))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    if args.out is None:
        args.out = HERE / "results" / ("rein_quick.json" if args.quick else "rein.json")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "rein_built_with": "g++ -O3 -std=c++11",
                                    "cpu": os.cpu_count()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
