"""Wildcard company prefixes and the command's path on the automotive scenario.

The automotive scenario of ``bench/xmlgen.py`` (183,275 sparse subscriptions; ``--subs``
for fewer) is registered once; then, alternating in one process, median of ``--repeat``:

* **api**: events per CPU second of ``XmlEventFilter.iter_results`` over 10 messages of
  1,000 ObjectEvents given as bytes (each notification's XML taken);
* **cli**: the same messages read from files through ``siftbus xml-filter``'s JSON-lines
  writer (``siftbus.cli.xmlfilter._json_lines``) into ``/dev/null``;

first as generated (*plain*), then with 153 subscriptions whose EPC pattern has a wildcard
company prefix (``urn:epc:idpat:sgtin:*.ITEM.*``) added (*wild*). The previous code as a
same-run baseline: ``git archive main src | tar -x -C /tmp/prev`` and run this script a
second time with ``PYTHONPATH=/tmp/prev/src``. Prints one JSON line (with the load average).

    python bench/xmlwild.py --subs 20000 --repeat 1      # a quick look
    python bench/xmlwild.py                             # the automotive scenario
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from siftbus.cli.xmlfilter import _json_lines
from siftbus.xmlfilter import ContentFilter, Subscription, XmlEventFilter, to_xml
from xmlgen import epcis_messages, subscriptions


def wildcard_subscriptions(n: int = 153, seed: int = 7) -> list[Subscription]:
    rnd = random.Random(seed)
    return [Subscription.build(("HTTP", f"http://wild/{i}"), [ContentFilter.build(
        "//ObjectEvent", [("epcList/epc", "match-epc",
                           [f"urn:epc:idpat:sgtin:*.{rnd.randrange(1000):06d}.*"])])],
        id=f"wild-{i}") for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--subs", type=int, default=183_275)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    f = XmlEventFilter()
    t = time.process_time()
    f.subscribe_xml(to_xml(subscriptions(args.subs), {"ext": "urn:example:epcis:ext"}),
                    default_method="cli", sender="stdout", freeze=True)
    out: dict[str, object] = {"subscriptions": args.subs,
                              "load_cpu_s": round(time.process_time() - t, 1),
                              "load_start": os.getloadavg()[0]}
    msgs = list(epcis_messages(10_000, per_message=1_000))
    with tempfile.TemporaryDirectory() as d:
        paths = [Path(d, f"m{i}.xml") for i in range(len(msgs))]
        for p, m in zip(paths, msgs, strict=True):
            p.write_bytes(m)

        def api() -> None:
            for m in msgs:
                for r in f.iter_results(m):
                    for note in r.notifications:
                        note.xml  # noqa: B018

        def cli() -> None:
            old = sys.stdout
            with open(os.devnull, "w") as sys.stdout:
                _json_lines(f, paths, False)
            sys.stdout = old

        for phase in ("plain", "wild"):
            if phase == "wild":
                f.subscribe_xml(to_xml(wildcard_subscriptions()), default_method="cli",
                                sender="stdout")
            api()  # the access table compiled, caches warm
            runs: dict[str, list[float]] = {"api": [], "cli": []}
            for _ in range(args.repeat):
                for name, fn in (("api", api), ("cli", cli)):
                    t = time.process_time()
                    fn()
                    runs[name].append(10_000 / (time.process_time() - t))
            out[phase] = {k: round(statistics.median(v)) for k, v in runs.items()}
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
