"""XML subscriptions across brokers: flooding against advertisements, with and without
covering (the thesis's §5.1.2 comparison), on the same workload in the same run.

A tree of seven brokers (B0 the root, B1 and B2 below it, B3 to B6 the leaves). Four
publishers, one at each leaf, each publishing the events read in its quarter of the 60
plants, and advertising exactly that (``//ObjectEvent`` whose ``readPoint/id`` starts
with one of its plants' prefixes). Sparse subscriptions (``bench/xmlgen.py``) are homed
at random brokers; half the events are published, a fifth of the subscriptions are
withdrawn, and the other half is published (``--workload``: dense by default, whose
broad subscriptions match tens of events per event and cover each other; sparse ones
rarely match at these sizes). For each strategy: messages and bytes
between brokers by kind, subscriptions held in the brokers' routing filters, deliveries
(checked equal to one XML filter holding every live subscription, or the benchmark
fails), and CPU seconds; medians of ``--repeat`` runs, the load average at the start and
the end.

    python bench/xmlnetwork.py [--subscriptions 500] [--events 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import xmlgen
from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, XmlNetwork

RESULTS = Path(__file__).parent / "results" / "xmlnetwork.json"
LINKS = [("B0", "B1"), ("B0", "B2"), ("B1", "B3"), ("B1", "B4"), ("B2", "B5"), ("B2", "B6")]
LEAVES = ["B3", "B4", "B5", "B6"]
CONFIGS = [("flooding", False), ("flooding", True), ("advertisements", False),
           ("advertisements", True)]


def _plant(event: str) -> int:
    rp = event.split("<readPoint><id>")[1].split("</id>")[0]
    return int(rp.split(":")[4].split(".")[0])


def workload(n_subs: int, n_events: int, kind: str) -> tuple[list[Subscription], dict[str, str],
                                                  list[tuple[str, bytes]], list[str]]:
    rnd = random.Random(3)
    subs = xmlgen.subscriptions(n_subs, workload=kind)
    home = {s.id: rnd.choice([n for link in LINKS for n in link]) for s in subs}
    events = []
    # the three fixed events use another naming of read points: left out, so that every
    # event a publisher sends matches its advertisement
    for ev in xmlgen.object_events(n_events + 3, universe=xmlgen.UNIVERSES[kind])[3:]:
        msg = (f'<epcis:EPCISDocument xmlns:epcis="{xmlgen.EPCIS_NS}" '
               f'xmlns:ext="{xmlgen.EXT_NS}"><EPCISBody><EventList>{ev}</EventList>'
               "</EPCISBody></epcis:EPCISDocument>").encode()
        events.append((LEAVES[_plant(ev) % 4], msg))
    drop = sorted(s.id for s in subs if rnd.random() < 0.2)
    return subs, home, events, drop


def advertisement(leaf: str) -> list[ContentFilter]:
    k = LEAVES.index(leaf)
    return [ContentFilter.build("//ObjectEvent", [
        ("readPoint/id", "string-match", [f"urn:epc:id:sgln:{p:07d}.*"])])
        for p in range(60) if p % 4 == k]


def single(subs: list[Subscription], events: list[tuple[str, bytes]]) -> Counter[str]:
    f = XmlEventFilter()
    for s in subs:
        f.subscribe(s)
    got: Counter[str] = Counter()
    for _, msg in events:
        for r in f.iter_results(msg):
            got.update(r.match.subscriptions)
    return got


def run(strategy: str, covering: bool, subs: list[Subscription], home: dict[str, str],
        events: list[tuple[str, bytes]], drop: list[str]) -> dict[str, Any]:
    t0 = time.process_time()
    net = XmlNetwork(LINKS, strategy=strategy, covering=covering)  # type: ignore[arg-type]
    for leaf in LEAVES:
        net.advertise(leaf, f"ad-{leaf}", advertisement(leaf))
    for s in subs:
        net.subscribe(home[s.id], s)
    t1 = time.process_time()
    half = len(events) // 2
    got: Counter[str] = Counter()
    for broker, msg in events[:half]:
        got.update(d.subscription for d in net.publish(broker, [msg]))
    held = sum(len(b.routing) for b in net.brokers.values())
    t2 = time.process_time()
    for sid in drop:
        net.unsubscribe(home[sid], sid)
    t3 = time.process_time()
    for broker, msg in events[half:]:
        got.update(d.subscription for d in net.publish(broker, [msg]))
    t4 = time.process_time()
    return {"strategy": strategy, "covering": covering,
            "messages": dict(net.traffic.messages), "bytes": dict(net.traffic.bytes),
            "routing_entries": held, "deliveries": sum(got.values()), "got": got,
            "subscribe_cpu_s": t1 - t0, "unsubscribe_cpu_s": t3 - t2,
            "publish_cpu_s": (t2 - t1) + (t4 - t3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subscriptions", type=int, default=500)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workload", default="dense", choices=sorted(xmlgen.WORKLOADS))
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    load_start = os.getloadavg()
    subs, home, events, drop = workload(args.subscriptions, args.events, args.workload)
    live = [s for s in subs if s.id not in set(drop)]
    half = len(events) // 2
    want = single(subs, events[:half]) + single(live, events[half:])
    rows = []
    for strategy, covering in CONFIGS:
        runs = [run(strategy, covering, subs, home, events, drop) for _ in range(args.repeat)]
        r = runs[0]
        if r["got"] != want:
            raise SystemExit(f"benchmark check FAILED: {strategy}, covering={covering} "
                             f"delivered {r['deliveries']} against {sum(want.values())}")
        del r["got"]
        r["subscribe_cpu_s"] = round(statistics.median(x["subscribe_cpu_s"] for x in runs), 3)
        for k in ("unsubscribe_cpu_s", "publish_cpu_s"):
            r[k] = round(statistics.median(x[k] for x in runs), 3)
        rows.append(r)
        print(f"{strategy} covering={covering}: {r}", file=sys.stderr, flush=True)
    print(f"{args.subscriptions:,} {args.workload} subscriptions at random brokers, "
          f"{len(events):,} events from 4 publishers, {len(drop)} subscriptions withdrawn "
          f"halfway; deliveries {sum(want.values()):,} (equal to one filter's in every row)\n")
    print("| strategy | covering | subscribe msgs | unsubscribe msgs | advertise msgs | event "
          "msgs | event MiB | routing entries | CPU s subscribe | CPU s unsubscribe "
          "| CPU s publish |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        m, b = r["messages"], r["bytes"]
        print(f"| {r['strategy']} | {'yes' if r['covering'] else 'no'} | "
              f"{m.get('subscribe', 0):,} | {m.get('unsubscribe', 0):,} | "
              f"{m.get('advertise', 0):,} | {m.get('event', 0):,} | "
              f"{b.get('event', 0) / 2**20:.2f} | {r['routing_entries']:,} | "
              f"{r['subscribe_cpu_s']} | {r['unsubscribe_cpu_s']} | {r['publish_cpu_s']} |")
    load_end = os.getloadavg()
    print(f"\nload average {load_start} at start, {load_end} at end")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "xmlnetwork", "workload": args.workload,
        "subscriptions": args.subscriptions,
        "events": len(events), "withdrawn": len(drop), "deliveries": sum(want.values()),
        "rows": rows, "repeat": args.repeat, "loadavg_start": load_start,
        "loadavg": load_end, "cpus": os.cpu_count(), "python": platform.python_version(),
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
