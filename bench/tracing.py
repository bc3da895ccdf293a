"""The publish path with tracing off (the default) and on (issue 34): events/s a client
publishes through one broker to one subscriber, each mode in a fresh process.

* **off**: ``siftbus.telemetry`` never enabled; the run checks that no ``opentelemetry``
  module was imported, so this is also the cost where the package is not installed;
* **before**: the same off path on the code before tracing (``--before SRC``: a checkout's
  ``src`` without this change, e.g. the main branch's), the cost of the hooks themselves;
* **on**: the OpenTelemetry SDK's ``TracerProvider`` with a span processor that drops
  every span (the cost of making spans and carrying contexts, no exporter).

Events are published one per ``publish()`` call (one frame per loop turn, the worst case
for per-frame tracing) and in batches of 1,000 (``publish_batch``); the run ends when the
subscriber has every notification. Run ``python bench/tracing.py [--quick]``; writes
``bench/results/tracing.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SCHEMA = '[T]\na = "int[0,999]"\nb = "enum[LO,MID,HI]"\n'


async def one_run(mode: str, n: int, batch: int) -> dict[str, Any]:
    from siftbus.broker.node import BrokerNode
    from siftbus.broker.server import BrokerServer
    from siftbus.client import Client
    from siftbus.model import parse_schema

    if mode == "on":
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

        import siftbus.telemetry as telemetry

        provider = TracerProvider()
        provider.add_span_processor(SpanProcessor())  # the base class: drops every span
        telemetry.enable(provider)
    schema = parse_schema(SCHEMA)
    srv = BrokerServer(BrokerNode("B1", schema))
    await srv.start()
    sub = await Client.connect("127.0.0.1", srv.port)
    got = 0
    done = asyncio.Event()

    def on_batch(b: Any) -> None:
        nonlocal got
        got += sum(len(x.ids) for x in b.blocks)
        if got >= n:
            done.set()

    await sub.subscribe("T(a >= 0)", batch_callback=on_batch)
    pub = await Client.connect("127.0.0.1", srv.port)
    await pub.ping()
    events = [{"type": "T", "a": i % 1000, "b": "LO"} for i in range(n)]
    cpu0, t0 = time.process_time(), time.perf_counter()
    if batch == 1:
        for e in events:
            await pub.publish(e)
            await asyncio.sleep(0)  # one frame per event
    else:
        for i in range(0, n, batch):
            await pub.publish_batch(events[i:i + batch])
    await asyncio.wait_for(done.wait(), 120)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await pub.close()
    await sub.close()
    await srv.close()
    imported = any(m.split(".")[0] == "opentelemetry" for m in sys.modules)
    if mode in ("off", "before"):
        assert not imported, "tracing off imported opentelemetry"
    return {"mode": mode, "batch": batch, "events": n, "seconds": elapsed,
            "events_per_s": n / elapsed, "cpu_s": cpu, "opentelemetry_imported": imported}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--role", nargs=3, metavar=("MODE", "N", "BATCH"))
    ap.add_argument("--before", type=Path, default=None,
                    help="src directory of the code before tracing (adds the 'before' mode)")
    args = ap.parse_args()
    if args.role:
        mode, n, batch = args.role
        print(json.dumps(asyncio.run(one_run(mode, int(n), int(batch)))))
        return
    sizes = {1: 3000 if args.quick else 10000, 1000: 50000 if args.quick else 200000}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    load = os.getloadavg()
    modes = ("before", "off", "on") if args.before else ("off", "on")
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeats):  # interleaved: every mode sees the same machine state
        for batch, n in sizes.items():
            for mode in modes:
                src = args.before if mode == "before" else ROOT / "src"
                out = subprocess.run([sys.executable, __file__, "--role", mode, str(n),
                                      str(batch)], capture_output=True, text=True,
                                     check=True, env={**env, "PYTHONPATH": str(src)},
                                     timeout=600)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for batch in sizes:
        row: dict[str, Any] = {"batch": batch, "events": sizes[batch]}
        for mode in modes:
            mine = [r for r in runs if r["batch"] == batch and r["mode"] == mode]
            row[mode] = statistics.median(r["events_per_s"] for r in mine)
            row[f"{mode}_cpu_s"] = statistics.median(r["cpu_s"] for r in mine)
        row["on_vs_off"] = row["on"] / row["off"]
        rows.append(row)
    out = {"repeats": args.repeats, "loadavg_before": load, "loadavg_after": os.getloadavg(),
           "rows": rows, "runs": runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tracing.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n### Publish path, tracing off / on (median of {args.repeats}; load "
          f"{load[0]:.2f} before, {out['loadavg_after'][0]:.2f} after)\n")
    print("| events per frame | events | " + " | ".join(f"{m}: events/s" for m in modes) +
          " | on/off | " + " | ".join(f"CPU s {m}" for m in modes) + " |")
    print("|---|---|" + "---|" * (2 * len(modes) + 1))
    for r in rows:
        print(f"| {r['batch']} | {r['events']:,} | " +
              " | ".join(f"{r[m]:,.0f}" for m in modes) + f" | {r['on_vs_off']:.2f} | " +
              " | ".join(f"{r[m + '_cpu_s']:.2f}" for m in modes) + " |")


if __name__ == "__main__":
    main()
