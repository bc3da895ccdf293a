"""Session handoffs racing a moving publisher on slow links (issue 30 item 2): an
exploration harness, not a benchmark.

Five in-process brokers (the tree of ``tests/broker/mobility.py``) under each routing
and handoff pair of ``--protocols`` (:data:`PAIRS`: the acyclic handoff under forwarding
with covering, ``cov``, with advertisements, ``adv``, and under flooding, ``flood``; the
rendezvous handoff under rendezvous routing, ``rdv``; ping/pong under forwarding,
``ping``); three session subscribers with
covering profiles (``T()``, ``T(a <= 50)``, ``T(a >= 0)``) and a session publisher. Each
of six rounds, concurrently: one subscriber's connection ends (closed, or aborted like a
killed process, ``--abort``) and it reconnects with its ``SessionState`` at another
broker, while the publisher moves to a random broker and publishes a batch of 2-8 rows
with ``ack``. Every frame between brokers is handled after a random delay of up to
``--delay`` seconds (per link in order: slow links, the order kept). At the end every
session must hold every row once; a run prints ``ok`` or ``LOSS`` with the missing rows.

    python bench/session_races.py --seeds 200:240 --delay 0.08 --abort 0.5
    python bench/session_races.py --seeds 200:216 --protocols rdv,ping --revive

Found with it (2026-11-29): seeds 201 and 206 of ``--seeds 200:208 --delay 0.08
--abort 0.5`` lost one batch at one session that had reconnected with its state. The
cause was two live processes of one session: an aborted client reconnected by itself
with the state the harness then gave a new client, and two brokers claimed one epoch
(``tests/broker/test_session_claims_race.py``, fixed; ``docs/mobility.md``). Aborted
clients now stay dead (``--revive``: the old behaviour), and a link's frames are no
longer handled after that link went down, which a real broker never does.

Then (2026-11-29, ``--revive``, seeds 200-215): the same race under the rendezvous
handoff and ping/pong lost rows too -- both claims subscribed under one tag and the
loser's teardown withdrew the winner's routes, and ping/pong pinged a holder whose
client was connected, which never answered. Epochs are unique per broker since
(``siftbus.broker.overlay``).

Then (2026-11-29, one process per session): "flooding sometimes loses every row of one
session" (1-2 runs in 140; 5 in 140 with another helper's ``--revive`` runs going) was
not the brokers' routing but this harness: a ``--revive`` run left its revived clients
running (only the last client per session was closed), and each kept reconnecting to
its old port for minutes -- a port a broker of a later run, of this process or another
one on the machine, may have by then. Its HELLO came with an old state of the same
session id (traced: epoch 22 and ack 30 at a broker where no client of the run had
connected; the run's own ``s3`` was then refused there as "already connected" and
started elsewhere). That exposed a real defect: its locate found no copy, and the new
session numbered from 1 while counting the client's 30 as acknowledged, so rows 1-30
were never sent, also to the run's own process, which took that copy over. Fixed in
``SessionTable.establish`` (a session that starts without a copy numbers after the
client's ack; ``test_a_state_whose_session_is_held_nowhere_gets_the_rows_after_its_own``).
The harness now gives each run its own session ids and closes every client it made,
and starts the rounds once no broker-to-broker frame is in flight (:func:`quiet`; it
slept 0.5 s, and at load 7-18 the first batch under advertisements could miss sessions
whose subscriptions had not reached the publisher's broker yet: seed 1440). Seeds
200-599, every pair, one process per session: no loss on main's code nor after the
fix (``docs/mobility.md``, "Loopback against the simulator").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from broker.mobility import NAMES, SCHEMA, TREE, T
from broker.servers import close_all, start_network
from siftbus.broker import node as nodemod
from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.errors import RemoteError
from siftbus.model import Event

PAIRS: dict[str, dict[str, Any]] = {
    "cov": {"protocol": "forwarding", "handoff": "acyclic"},
    "adv": {"protocol": "forwarding", "handoff": "acyclic", "advertisements": True},
    "flood": {"protocol": "flooding", "handoff": "acyclic"},
    "rdv": {"protocol": "rendezvous", "handoff": "rendezvous", "rendezvous": {"T": "B1"}},
    "ping": {"protocol": "forwarding", "handoff": "pingpong"},
}
"""The routing and handoff pairs, by the name ``--protocols`` and the output use."""


LATE = [0]
"""Broker-to-broker frames read and not yet handled (:func:`slow_links`)."""


def slow_links(rng: random.Random, delay: float) -> None:
    """Every broker-to-broker frame handled ``0..delay`` s late, in order per link."""
    handle = nodemod.BrokerNode.handle
    down = nodemod.BrokerNode.broker_down
    last: dict[tuple[str, str], float] = {}
    ends: dict[tuple[int, str], int] = {}  # per node and link: how often it went down

    def delayed(self: Any, link: str, msg: Any) -> None:
        if link.startswith("@") or delay <= 0:
            handle(self, link, msg)
            return
        loop = asyncio.get_running_loop()
        key = (self.name, link)
        at = max(loop.time() + rng.random() * delay, last.get(key, 0.0) + 1e-6)
        last[key] = at
        LATE[0] += 1
        loop.call_at(at, late, self, link, msg, ends.get((id(self), link), 0))

    def late(self: Any, link: str, msg: Any, generation: int) -> None:
        LATE[0] -= 1
        # a real broker never reads a link's frames after that link went down
        if ends.get((id(self), link), 0) == generation:
            handle(self, link, msg)

    def broker_down(self: Any, name: str) -> None:
        ends[(id(self), name)] = ends.get((id(self), name), 0) + 1
        down(self, name)

    nodemod.BrokerNode.handle = delayed  # type: ignore[method-assign]
    nodemod.BrokerNode.broker_down = broker_down  # type: ignore[method-assign]


async def quiet(servers: dict[str, Any], limit: float = 20.0) -> None:
    """Until no broker-to-broker frame is on its way or waits to be handled (the
    subscriptions and advertisements made so far are everywhere they go)."""
    end = time.monotonic() + limit
    calm = 0
    while calm < 3 and time.monotonic() < end:
        stats = [srv.node.stats() for srv in servers.values()]
        flowing = sum(st.messages_in for st in stats) != sum(st.messages_out for st in stats)
        calm = 0 if flowing or LATE[0] else calm + 1
        await asyncio.sleep(0.02)


async def run(seed: int, pair: str, abort: float, revive: bool = False,
              own_state: bool = False) -> dict[str, list[int]]:
    rng = random.Random(seed)
    adverts = bool(PAIRS[pair].get("advertisements"))
    servers = await start_network(NAMES, TREE, strategy="covering", schema=SCHEMA,
                                  **PAIRS[pair])
    profiles = {"s1": "T()", "s2": "T(a <= 50)", "s3": "T(a >= 0)"}
    at = {"s1": "B3", "s2": "B4", "s3": "B2"}
    # session ids of this run only: a client of another run -- a revived one of an
    # earlier run of ``--revive``, or of another harness process, reconnecting to a
    # port that one of these brokers now has -- must not take these sessions over
    run_id = f"{os.getpid()}-{seed}-{pair}"
    ids = {sid: f"{sid}-{run_id}" for sid in [*profiles, "p"]}
    states = {sid: SessionState(ids[sid]) for sid in profiles}
    got: dict[str, list[int]] = {sid: [] for sid in profiles}
    clients: dict[str, Client] = {}
    made: list[Client] = []  # every client, also those replaced: all closed at the end
    sent: list[int] = []
    p: Client | None = None

    async def attach(sid: str) -> None:
        # reconnect=False: an aborted client is a killed process; with the default
        # policy (--revive) it reconnects by itself, a second process sharing the
        # first's state -- the same object, or (``--own-state``) a copy of it: two real
        # processes each have their own, and one object shared by two live clients
        # drops rows one of them numbered at or below what the other has seen
        if own_state:
            states[sid] = copy.deepcopy(states[sid])
        for _ in range(len(NAMES)):
            try:
                c = await Client.connect(port=servers[at[sid]].port, session=states[sid],
                                         reconnect=revive)
                made.append(c)
                break
            except RemoteError as exc:
                if "already connected" not in str(exc):
                    raise
                # --revive: the other process of the session is connected there (a
                # second one at the same broker is refused): start it elsewhere
                at[sid] = rng.choice([b for b in NAMES if b != at[sid]])
        else:
            raise AssertionError(f"{sid}: no broker took the second process")
        def row(n: Any) -> None:
            got[sid].append(int(n.event.keys[1]))

        c.unclaimed_callback = row
        try:
            await c.subscribe("f: " + profiles[sid], row)
        except RemoteError as exc:
            # --revive: the process that lost the session to the other one may be
            # refused (told SessionMoved); rows reaching it still count
            print(seed, pair, sid, "refused:", str(exc)[:100], flush=True)
        clients[sid] = c

    try:
        for sid in profiles:
            await attach(sid)
        p = await Client.connect(port=servers["B3"].port, session=SessionState(ids["p"]))
        made.append(p)
        if adverts:
            await p.advertise("T()")
        # a row published before the subscriptions have reached the publisher's broker
        # (under advertisements they travel only once its advertisement reached them)
        # reaches no session: not what this harness looks for (seed 1440 of "adv",
        # load 7: the first batch missed two sessions that had not moved at all)
        await quiet(servers)
        await asyncio.sleep(0.1)
        for _ in range(6):
            sid = rng.choice(list(profiles))
            to = rng.choice([b for b in NAMES if b != at[sid]])
            p_to = rng.choice(NAMES)

            async def reconnect(sid: str = sid, to: str = to) -> None:
                conn = clients[sid]._conn
                if rng.random() < abort and conn is not None:
                    conn.abort()  # like a killed process
                else:
                    await clients[sid].close()
                await asyncio.sleep(rng.random() * 0.02)
                at[sid] = to
                await attach(sid)

            async def move_and_publish(p: Client = p, p_to: str = p_to) -> None:
                await asyncio.sleep(rng.random() * 0.02)
                await p.move("127.0.0.1", servers[p_to].port)
                rows = list(range(len(sent) + 1, len(sent) + 1 + rng.randint(2, 8)))
                sent.extend(rows)
                await p.publish_batch([Event(T, (rng.randint(0, 50), b)) for b in rows],
                                      ack=True)

            await asyncio.gather(reconnect(), move_and_publish())
            await asyncio.sleep(rng.random() * 0.05)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5 and any(set(g) != set(sent) for g in got.values()):
            await asyncio.sleep(0.1)
        # a row twice is reported apart ("twice"): with --revive two processes of one
        # session may each take a row the other had not acknowledged yet
        twice = sum(len(g) - len(set(g)) for g in got.values())
        if twice:
            print(seed, pair, "twice", twice, flush=True)
        missing = {sid: set(sent) - set(g) for sid, g in got.items() if set(sent) - set(g)}
        for sid, rows in missing.items():
            # with --revive the process that keeps the session may be gone: its rows
            # wait in the session's buffer for the next one (not lost; reported apart)
            kept = rows & held_rows(servers, ids[sid])
            if kept:
                print(seed, pair, sid, "held for the next process:", sorted(kept), flush=True)
                rows -= kept
        return {sid: sorted(rows) for sid, rows in missing.items() if rows}
    finally:
        # a revived client left running would reconnect to its port after the run,
        # which a broker of a later run (of any process) may have by then
        for c in made:
            with contextlib.suppress(Exception):  # a client already gone
                await c.close()
        await close_all(servers)


def held_rows(servers: dict[str, Any], sid: str) -> set[int]:
    """The rows (``b``) of session ``sid`` waiting in a buffer at any broker."""
    out: set[int] = set()
    for srv in servers.values():
        table = srv.node.sessions
        for s in (table.sessions.get(sid), table.outgoing.get(sid)):
            if s is None:
                continue
            blocks = [c.block for c in s.chunks]
            blocks += [b for items, _ in s.pending for b, _, _ in items]
            for b in blocks:
                out.update(int(e.keys[1]) for e in b.events())
    return out


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0:20", help="A:B, the seeds A..B-1")
    ap.add_argument("--delay", type=float, default=0.08)
    ap.add_argument("--abort", type=float, default=0.5)
    ap.add_argument("--protocols", default="cov,adv",
                    help=f"comma-separated, of {', '.join(PAIRS)}")
    ap.add_argument("--own-state", action="store_true",
                    help="with --revive: the new process starts from a copy of the state "
                         "(two real processes), not the revived client's own object")
    ap.add_argument("--revive", action="store_true",
                    help="aborted clients reconnect by themselves (two processes, one state)")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.seeds.split(":"))
    slow_links(random.Random(lo), a.delay)
    pairs = a.protocols.split(",")
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        ap.error(f"unknown --protocols {', '.join(unknown)} (have {', '.join(PAIRS)})")
    lost = {p: 0 for p in pairs}
    for seed in range(lo, hi):
        for name in pairs:
            try:
                bad = await asyncio.wait_for(run(seed, name, a.abort, a.revive, a.own_state), 90)
            except Exception as exc:
                print(seed, name, "ERROR", type(exc).__name__, str(exc)[:160], flush=True)
                continue
            lost[name] += bool(bad)
            print(seed, name, f"LOSS {bad}" if bad else "ok", flush=True)
    print("runs with a loss:", ", ".join(f"{p} {n}/{hi - lo}" for p, n in lost.items()),
          flush=True)
    return 1 if any(lost.values()) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
