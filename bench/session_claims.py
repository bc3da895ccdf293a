"""What the owner check costs a secured handoff (issue 17: a session's principal checked
across brokers before any handoff, ``siftbus.broker.claims``).

Real brokers on 127.0.0.1 (in this process), a 5-broker tree, one session subscriber
with one profile, an idle network. Per handoff protocol, the same moves on an open
network and on a secured one (TLS, tokens, rights), in alternating runs: broker-to-broker
``HANDOFF`` messages per move (the check's ``chk``/``cha`` or ``cw``/``ce`` included) and
the latency from ``move`` (or a new process's connect) until the new broker reports the
session there. Baselines of the same run: the open network's move, and reconnecting to
the broker the session is at (no handoff, no check; on the secured network it pays TLS
and the token check only). ``fresh``: a new process with the client's state connecting
without naming its old broker (the check asks the whole tree). ``id-only``: a new process
that knows only the session id (no epoch, no broker: ``siftbus subscribe --session``
restarted elsewhere), whose broker finds the newest copy with one wave before the ACK
and then takes it over like a move; ``id-only-same``: such a process at the broker that
holds the session (it pays the wave too: a newer copy may be elsewhere).

    python bench/session_claims.py             # ~1 minute on a quiet machine
    python bench/session_claims.py --repeats 1 --moves 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker.servers import close_all, start_network  # noqa: E402
from mobility import table  # noqa: E402  (bench/mobility.py: the same markdown table)
from secure import make_pki, policy, start_secure  # noqa: E402
from siftbus.broker.server import BrokerServer  # noqa: E402
from siftbus.client import Client  # noqa: E402
from siftbus.client.session import SessionState  # noqa: E402

NAMES = ["B0", "B1", "B2", "B3", "B4"]
TREE = [("B0", "B1"), ("B0", "B2"), ("B1", "B3"), ("B1", "B4")]
SETUPS = [("acyclic", "forwarding", "covering"), ("pingpong", "forwarding", "merging"),
          ("rendezvous", "rendezvous", "covering")]
RIGHTS = {"alice": {"subscribe": ["*"], "publish": ["*"]}}
MODES = ("reconnect", "move", "fresh", "id-only", "id-only-same")


def _messages(servers: dict[str, BrokerServer]) -> int:
    return sum(sum(s.node.handoff.counts.values()) for s in servers.values())


async def run(setup: tuple[str, str, str], secured: bool, mode: str, moves: int,
              pki_dir: Path) -> dict[str, Any]:
    handoff, protocol, strategy = setup
    rdv = {"T": "B1", "U": "B1"} if protocol == "rendezvous" else None
    kw: dict[str, Any] = {}
    if secured:
        pki = make_pki(pki_dir, brokers=NAMES, clients=("alice",))
        servers = await start_secure(NAMES, TREE, policy(pki, RIGHTS, brokers=NAMES), pki,
                                     protocol=protocol, strategy=strategy, rendezvous=rdv)
        kw = {"token": pki.token("alice"), "tls": pki.client_tls(None),
              "server_hostname": "localhost"}
    else:
        servers = await start_network(NAMES, TREE, protocol, strategy, rdv)
    rng = random.Random(7)
    lat: list[float] = []
    msgs: list[int] = []
    cpu0 = time.process_time()
    state = SessionState("s1")
    at = "B3"
    c = await Client.connect(port=servers[at].port, session=state, **kw)
    try:
        await c.subscribe("f: T(a = 3)")
        await asyncio.sleep(0.3)
        for _ in range(moves):
            to = at if mode in ("reconnect", "id-only-same") \
                else rng.choice([b for b in NAMES if b != at])
            before = _messages(servers)
            t0 = time.monotonic()
            if mode in ("fresh", "id-only", "id-only-same"):
                await c.close()
                if mode != "fresh":  # only the id (and its last number, kept by the app)
                    state = SessionState("s1", last=state.last)
                c = await Client.connect(port=servers[to].port, session=state, **kw)
            else:
                await c.move("127.0.0.1", servers[to].port,
                             server_hostname=kw.get("server_hostname"))
            for _ in range(1000):
                if servers[to].node.sessions.sessions["s1"].state == "attached":
                    break
                await asyncio.sleep(0.001)
            lat.append(time.monotonic() - t0)
            await asyncio.sleep(0.05)  # the last relayed messages
            msgs.append(_messages(servers) - before)
            at = to
    finally:
        await close_all(servers, [c])
    return {"handoff": handoff, "network": "secured" if secured else "open", "mode": mode,
            "moves": moves, "messages_p50": statistics.median(msgs),
            "latency_ms_p50": 1000 * statistics.median(lat),
            "cpu_ms": 1000 * (time.process_time() - cpu0) / moves}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--moves", type=int, default=12)
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated subset of " + ", ".join(MODES))
    args = ap.parse_args()
    load0 = os.getloadavg()
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for setup in SETUPS:
                for mode in args.modes.split(","):
                    # alternate which network goes first: the machine's drift hits both
                    order = (False, True) if rep % 2 == 0 else (True, False)
                    for secured in order:
                        d = Path(tmp) / f"pki{rep}{setup[0]}{mode}{secured}"
                        d.mkdir()
                        r = asyncio.run(run(setup, secured, mode, args.moves, d))
                        runs.setdefault((setup[0], mode, r["network"]), []).append(r)
    rows = []
    for (handoff, mode, net), rs in runs.items():
        rows.append({"handoff": handoff, "mode": mode, "network": net,
                     "messages_p50": statistics.median(r["messages_p50"] for r in rs),
                     "latency_ms_p50": statistics.median(r["latency_ms_p50"] for r in rs),
                     "cpu_ms_per_move": statistics.median(r["cpu_ms"] for r in rs),
                     "runs": len(rs)})
    load = os.getloadavg()
    print("## Handoff cost: the owner check and a process with only the session id "
          "(5-broker tree, loopback, medians "
          f"of {args.repeats} runs of {args.moves} moves)\n")
    print(table(rows, ["handoff", "mode", "network", "messages_p50", "latency_ms_p50",
                       "cpu_ms_per_move", "runs"]))
    print(f"\nload average before {load0[0]:.1f}, after {load[0]:.1f}")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "session_claims.json").write_text(json.dumps(
        {"rows": rows, "loadavg": [load0, load], "repeats": args.repeats,
         "moves": args.moves}, indent=1))


if __name__ == "__main__":
    main()
