"""Covering structures: insert/delete cost and table size, filters poset vs forest.

For each workload (``standard``: the matcher benchmark's 12-attribute profiles, little
covering; ``building``: Bittner's building automation, heavy covering and duplicates) and
each size n, the script builds a :class:`FilterPoset` and a :class:`PosetForest` (both
indexed; the literal root-walking variants too at small n), then measures on the full
table:

* insert: adding a sample of fresh profiles, one at a time (then removing them again);
* delete: removing a sample of the stored profiles (then putting them back) — a covering
  node's removal re-links its successors (poset) or re-inserts its subtrees (forest);
* size: distinct filters (nodes), roots, edges;
* forwarding: the root set, i.e. what a broker must send its parent; ``shrink`` is the
  share of profiles covering saves (1 - roots / profiles);
* match: events/s walking from the roots, against the reference matcher on the same
  events (results are checked equal);
* covering queries (:class:`CoveringIndex` over all n profiles): ``covering(p)`` and
  ``covered(p)`` per query, against the linear scan answering the same question
  (results checked equal);
* peer-to-peer forwarding (``ForwardingTable``, the broker's routing table; neighbours
  N1..N3 plus local clients, each profile from one of them at random):
  subscribe/unsubscribe cost and messages, and per neighbour the size of out(Y) against
  forwarding every profile not from Y (no covering), for the ``covering`` strategy on
  the poset (the broker's choice) and the forest, ``merging``, and ``simple`` (no
  covering: the same-run baseline).

The baseline for insert and delete is what a broker without a covering structure does:
a linear scan of every stored profile with ``covers`` (is the new profile covered? which
stored profiles did the removed one cover?), timed on the same table in the same run.
Figures are medians over ``--repeat`` rounds. The machine is shared (2 cores, several
engineers running tests), so absolute times are noisy: compare the ratios.

    .venv/bin/python bench/covering.py            # 1k, 10k, 100k
    .venv/bin/python bench/covering.py --quick    # 1k, 10k, fewer samples
    .venv/bin/python bench/covering.py --full     # + walking variants at 10k, forwarding 100k
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from siftbus.covering.forest import PosetForest
from siftbus.covering.forwarding import ForwardingTable
from siftbus.covering.poset import FilterPoset
from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import covers
from siftbus.covering.table import TableBase
from siftbus.match.reference import ReferenceMatcher
from siftbus.model import Event, Profile
from workload import (
    building_events,
    building_profiles,
    standard_events,
    standard_profiles,
)

RESULTS = Path(__file__).resolve().parent / "results" / "covering.json"

WORKLOADS: dict[str, tuple[Callable[[int], list[Profile]], Callable[[int], list[Event]]]] = {
    "standard": (lambda n: standard_profiles(n, seed=11), lambda n: standard_events(n)),
    "building": (lambda n: building_profiles(n, seed=13), lambda n: building_events(n)),
}


def _median_us(rounds: list[float], ops: int) -> float:
    return statistics.median(rounds) / max(ops, 1) * 1e6


def baseline_insert_us(stored: Sequence[Profile], fresh: Sequence[Profile],
                       repeat: int) -> float:
    """Linear scan: is the new profile covered by any stored one?"""
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in fresh:
            any(covers(q, p) for q in stored)
        rounds.append(time.perf_counter() - t0)
    return _median_us(rounds, len(fresh))


def baseline_delete_us(stored: Sequence[Profile], gone: Sequence[Profile],
                       repeat: int) -> float:
    """Linear scan: which stored profiles did the removed one cover?"""
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in gone:
            [q for q in stored if q is not p and covers(p, q)]
        rounds.append(time.perf_counter() - t0)
    return _median_us(rounds, len(gone))


def measure(cls: type[TableBase], indexed: bool, base: list[Profile], fresh: list[Profile],
            victims: list[Profile], events: list[Event], expected: list[list[str]],
            repeat: int) -> dict[str, Any]:
    table = cls(indexed=indexed)
    t0 = time.perf_counter()
    for p in base:
        table.add(p)
    build = time.perf_counter() - t0
    ins, dele = [], []
    comparisons_before = table.comparisons
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in fresh:
            table.add(p)
        ins.append(time.perf_counter() - t0)
        for p in fresh:
            table.remove(p.id)
        t0 = time.perf_counter()
        for p in victims:
            table.remove(p.id)
        dele.append(time.perf_counter() - t0)
        for p in victims:
            table.add(p)
    ops = repeat * (2 * len(fresh) + 2 * len(victims))
    roots = len(table.root_nodes())
    t0 = time.perf_counter()
    got = [table.match(e) for e in events]
    match_s = time.perf_counter() - t0
    if got != expected:
        raise SystemExit(f"{cls.__name__}: matches differ from the reference matcher")
    return {
        "structure": ("poset" if cls is FilterPoset else "forest")
        + ("" if indexed else "-walk"),
        "build_us_per_insert": build / len(base) * 1e6,
        "insert_us": _median_us(ins, len(fresh)),
        "delete_us": _median_us(dele, len(victims)),
        "covering_tests_per_op": (table.comparisons - comparisons_before) / max(ops, 1),
        "nodes": table.node_count,
        "roots": roots,
        "edges": len(table.edges()),
        "shrink": 1 - roots / len(base),
        "match_events_per_s": len(events) / match_s if match_s else float("inf"),
    }


NEIGHBOURS = ["N1", "N2", "N3"]


def measure_queries(base: list[Profile], probes: list[Profile], k: int,
                    repeat: int) -> dict[str, Any]:
    index = CoveringIndex(base)
    out: dict[str, Any] = {}
    for name, test in (("covering", lambda q, p: covers(q, p)),
                       ("covered", lambda q, p: covers(p, q))):
        rounds = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for p in probes:
                getattr(index, name)(p)
            rounds.append(time.perf_counter() - t0)
        fast = _median_us(rounds, len(probes))
        t0 = time.perf_counter()
        for p in probes[:k]:
            want = sorted(q.id for q in base if q.id != p.id and test(q, p))
            if [q.id for q in getattr(index, name)(p)] != want:
                raise SystemExit(f"CoveringIndex.{name} differs from the linear scan")
        slow = (time.perf_counter() - t0) / k * 1e6
        out[f"{name}_us"] = fast
        out[f"{name}_linear_us"] = slow
        out[f"{name}_speedup"] = slow / fast
    return out


FORWARDING = {  # row name -> ForwardingTable arguments
    "simple": {"strategy": "simple"},
    "poset": {"strategy": "covering", "structure": FilterPoset},
    "forest": {"strategy": "covering", "structure": PosetForest},
    "merging": {"strategy": "merging"},
}


def measure_forwarder(variant: str, base: list[Profile], victims: list[Profile],
                      repeat: int) -> dict[str, Any]:
    rng = random.Random(len(base))
    iface = {p.id: rng.choice([*NEIGHBOURS, "local"]) for p in base}
    kw = dict(FORWARDING[variant])
    structure = kw.pop("structure", None)
    fwd = ForwardingTable(NEIGHBOURS, structure=structure() if structure else None, **kw)
    t0 = time.perf_counter()
    for p in base:
        fwd.subscribe(p, iface[p.id])
    sub_us = (time.perf_counter() - t0) / len(base) * 1e6
    exported = sum(len(fwd.exported(y)) for y in NEIGHBOURS)
    flood = sum(sum(1 for p in base if iface[p.id] != y) for y in NEIGHBOURS)
    rounds, msgs = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in victims:
            for u in fwd.unsubscribe(p.id).values():
                msgs += len(u.subscribe) + len(u.unsubscribe)
        rounds.append(time.perf_counter() - t0)
        for p in victims:
            fwd.subscribe(p, iface[p.id])
    return {
        "structure": variant,
        "subscribe_us": sub_us,
        "unsubscribe_us": _median_us(rounds, len(victims)),
        "messages_per_unsubscribe": msgs / max(1, repeat * len(victims)),
        "exported_per_neighbour": exported / len(NEIGHBOURS),
        "flooded_per_neighbour": flood / len(NEIGHBOURS),
        "forward_shrink": 1 - exported / max(1, flood),
    }


def run(sizes: list[int], sample: int, repeat: int, n_events: int, walk_upto: int,
        fwd_upto: int, only: list[str], fwd_rows: list[dict[str, Any]],
        query_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in only:
        gen_profiles, gen_events = WORKLOADS[name]
        for n in sizes:
            allp = gen_profiles(n + sample)
            base, fresh = allp[:n], allp[n:]
            victims = random.Random(n).sample(base, min(sample, n))
            events = gen_events(n_events)
            ref = ReferenceMatcher()
            for p in base:
                ref.add(p)
            t0 = time.perf_counter()
            expected = [ref.match(e) for e in events]
            ref_s = time.perf_counter() - t0
            ref_eps = len(events) / ref_s if ref_s else float("inf")
            # The linear baselines are O(n) per operation: time a few operations only.
            k = max(10, min(sample, 20_000 // max(1, n // 10)))
            b_ins = baseline_insert_us(base, fresh[:k], repeat)
            b_del = baseline_delete_us(base, victims[:k], repeat)
            variants = [(FilterPoset, True), (PosetForest, True)]
            if n <= walk_upto:
                variants += [(FilterPoset, False), (PosetForest, False)]
            for cls, indexed in variants:
                r = measure(cls, indexed, base, fresh, victims, events, expected, repeat)
                r.update(workload=name, profiles=n, baseline_insert_us=b_ins,
                         baseline_delete_us=b_del,
                         insert_speedup=b_ins / r["insert_us"],
                         delete_speedup=b_del / r["delete_us"],
                         reference_events_per_s=ref_eps,
                         match_ratio=r["match_events_per_s"] / ref_eps)
                rows.append(r)
                print(_row(r), flush=True)
            qr = measure_queries(base, victims, k, repeat)
            qr.update(workload=name, profiles=n)
            query_rows.append(qr)
            if n <= fwd_upto:
                for variant in FORWARDING:
                    f = measure_forwarder(variant, base, victims, repeat)
                    f.update(workload=name, profiles=n)
                    fwd_rows.append(f)
    return rows


HEADER = ("| workload | n | structure | insert µs | ×linear | delete µs | ×linear | "
          "tests/op | nodes | roots | shrink | match ev/s | ×ref |\n"
          "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def _row(r: dict[str, Any]) -> str:
    return (f"| {r['workload']} | {r['profiles']} | {r['structure']} | {r['insert_us']:.0f} | "
            f"{r['insert_speedup']:.1f} | {r['delete_us']:.0f} | {r['delete_speedup']:.1f} | "
            f"{r['covering_tests_per_op']:.1f} | {r['nodes']} | {r['roots']} | "
            f"{r['shrink']:.1%} | {r['match_events_per_s']:.0f} | {r['match_ratio']:.2f} |")


FWD_HEADER = ("| workload | n | structure | subscribe µs | unsubscribe µs | msgs/unsub | "
              "out(Y) | flooding | shrink |\n|---|---:|---|---:|---:|---:|---:|---:|---:|")


def _fwd_row(r: dict[str, Any]) -> str:
    return (f"| {r['workload']} | {r['profiles']} | {r['structure']} | "
            f"{r['subscribe_us']:.0f} | {r['unsubscribe_us']:.0f} | "
            f"{r['messages_per_unsubscribe']:.2f} | {r['exported_per_neighbour']:.0f} | "
            f"{r['flooded_per_neighbour']:.0f} | {r['forward_shrink']:.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="1k and 10k, small samples")
    g.add_argument("--full", action="store_true",
                   help="also the walking variants at 10k and forwarding at 100k")
    ap.add_argument("--sizes", type=int, nargs="*", help="profile counts (overrides)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), action="append")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    sizes = args.sizes or ([1000, 10_000] if args.quick else [1000, 10_000, 100_000])
    sample = 50 if args.quick else 200
    n_events = 50 if args.quick else 100
    walk_upto = 10_000 if args.full else 1000
    print(HEADER, flush=True)
    t0 = time.perf_counter()
    fwd_rows: list[dict[str, Any]] = []
    query_rows: list[dict[str, Any]] = []
    rows = run(sizes, sample, args.repeat, n_events, walk_upto,
               100_000 if args.full else 10_000, args.workload or ["standard", "building"],
               fwd_rows, query_rows)
    print("\nCovering queries on the whole profile set (CoveringIndex vs linear scan):\n")
    print("| workload | n | covering µs | ×linear | covered µs | ×linear |\n"
          "|---|---:|---:|---:|---:|---:|")
    for r in query_rows:
        print(f"| {r['workload']} | {r['profiles']} | {r['covering_us']:.0f} | "
              f"{r['covering_speedup']:.0f} | {r['covered_us']:.0f} | "
              f"{r['covered_speedup']:.0f} |")
    print("\nPeer-to-peer forwarding (ForwardingTable, the broker's table; 3 neighbours + "
          "local clients), per neighbour:\n")
    print(FWD_HEADER)
    for r in fwd_rows:
        print(_fwd_row(r))
    out = {
        "benchmark": "covering",
        "command": " ".join(sys.argv),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "note": "2 shared cores, other jobs running: absolute times are noisy; ratios are "
                "against a linear covers() scan (insert, delete) and the reference matcher "
                "(match) measured in the same run; medians of --repeat rounds",
        "seconds": time.perf_counter() - t0,
        "rows": rows,
        "forwarding": fwd_rows,
        "queries": query_rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {args.out} in {out['seconds']:.0f} s")


if __name__ == "__main__":
    main()
