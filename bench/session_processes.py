"""Session handoffs racing a moving publisher on real processes (issue 30 item 2): what
``bench/session_races.py`` runs in one process, run again on loopback with real
``siftbus broker`` and ``siftbus subscribe`` processes -- "the simulator is not the
system".

Per run: five ``python -m siftbus broker`` processes in the tree of
``tests/broker/mobility.py`` (B0-B1, B0-B2, B1-B3, B1-B4; covering, each logging to its
own file with ``-v``) under one routing and handoff pair of ``session_races.PAIRS``
(``cov``, ``adv``, ``flood``, ``rdv``, ``ping``); three session subscribers, each the
README's "kill it, restart it" form, a real process: ``siftbus subscribe -b HOST:PORT
--session ID --out FILE 'f: PROFILE'`` (profiles ``T()``, ``T(a <= 50)``,
``T(a >= 0)``); and a session publisher (this process, ``siftbus.client``). Each round,
concurrently: one subscriber is killed with SIGKILL (``--kill``, a crash) or stopped with
SIGTERM (it closes its connection) and started again at ANOTHER broker from its FILE,
while the publisher moves to a random broker and publishes a batch of 2-8 rows with
``ack``, after a random delay within the time a subscriber takes to start (so the move
and the batch land before, during or after the new process's claim). At the end every
subscriber still runs, and every FILE must hold every row exactly once, numbered ``n =
1..k`` without gap: a run prints ``ok``, ``LOSS`` (the missing rows per session) or
``DUP``, and the logs of a bad run are kept. Every wait has a timeout; every child is
killed at the end, also on error (a run is a process group, killed whole on its timeout).

    python bench/session_processes.py --pairs cov,adv --runs 20 --subs both --jobs 2
    python bench/session_processes.py --code main=/tmp/main/src,now=src --runs 10
    python bench/session_processes.py --publishers 3 --movers 3 --subs app

``--subs app`` (or ``both``, alternating per run): each subscriber is instead a
process keeping its ``SessionState`` across connections (:func:`app`); unless killed it
closes or aborts its connection and reconnects with the state at another broker,
subscribing its profile again or not, and the publishers' moves land within that
reconnect's (short) time. ``--publishers N`` moving session publishers, ``--movers N``
subscribers restarted at once per round. ``--code LABEL=SRC,...`` runs each run once per
code, in turns (children get ``PYTHONPATH=SRC``); the summary gives runs and losses per
pair, kind of subscriber and code. Figures: docs/mobility.md ("The same on real
processes").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PAIRS: dict[str, str] = {
    "cov": 'protocol = "forwarding"\nhandoff = "acyclic"\n',
    "adv": 'protocol = "forwarding"\nhandoff = "acyclic"\nadvertisements = true\n',
    "flood": 'protocol = "flooding"\nhandoff = "acyclic"\n',
    "rdv": 'protocol = "rendezvous"\nhandoff = "rendezvous"\n\n[network.rendezvous]\nT = "B1"\n',
    "ping": 'protocol = "forwarding"\nhandoff = "pingpong"\n',
}
"""The pairs of ``bench/session_races.py`` as ``[network]`` keys."""

SCHEMA = '[T]\na = "int[0,99]"\nb = "int[0,1000000]"\n'
NAMES = ["B0", "B1", "B2", "B3", "B4"]
PARENT = {"B1": "B0", "B2": "B0", "B3": "B1", "B4": "B1"}
PROFILES = {"s1": "T()", "s2": "T(a <= 50)", "s3": "T(a >= 0)"}
START = {"s1": "B3", "s2": "B4", "s3": "B2"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rows_of(path: Path) -> list[tuple[int, int]]:
    """``(n, b)`` of each complete line of a subscriber's FILE."""
    if not path.exists():
        return []
    out = []
    for x in path.read_text().splitlines():
        if x.endswith("}"):
            d = json.loads(x)
            out.append((int(d["n"]), int(d["event"]["b"])))
    return out


class PortTaken(RuntimeError):
    """A broker did not start (its port was taken in the meantime): the run starts again."""


class Run:
    """One run's processes, files and bookkeeping (see the module docstring)."""

    def __init__(self, seed: int, pair: str, rounds: int, kill: float, work: Path,
                 mode: str = "cli", publishers: int = 1, movers: int = 1) -> None:
        self.rng = random.Random(seed)
        self.seed, self.pair, self.rounds, self.kill = seed, pair, rounds, kill
        self.mode, self.publishers, self.movers = mode, publishers, movers
        self.tag = f"{pair}{seed}-{os.getpid()}"
        """In the session ids: a client of another run can never take one of this run's."""
        self.work = work
        self.ports = {b: free_port() for b in NAMES}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.subs: dict[str, subprocess.Popen[bytes]] = {}
        self.at = dict(START)
        self.starts: list[float] = []  # seconds from spawn to "subscribed"
        self.reattaches: list[float] = []  # seconds from "reconnect" to "subscribed"
        self.sent: list[int] = []
        self.unsure: list[int] = []  # rows of a batch whose publish raised
        self.events: list[str] = []

    def note(self, what: str) -> None:
        self.events.append(f"{time.time():.3f} {what}")

    def spawn(self, args: list[str], log: Path,
              script: bool = False) -> subprocess.Popen[bytes]:
        how = [str(Path(__file__).resolve())] if script else ["-m", "siftbus"]
        with log.open("ab") as f:
            p = subprocess.Popen([sys.executable, *how, *args], stdout=f,
                                 stderr=subprocess.STDOUT,
                                 stdin=subprocess.PIPE if script else subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def config(self) -> Path:
        (self.work / "schema.toml").write_text(SCHEMA)
        text = ('[network]\nschema = "schema.toml"\nstrategy = "covering"\n'
                + PAIRS[self.pair] + "\n")
        for b in NAMES:
            text += f"[brokers.{b}]\nport = {self.ports[b]}\n"
            if b in PARENT:  # declared after its parent: it dials the parent
                text += f'neighbours = ["{PARENT[b]}"]\n'
            text += "\n"
        cfg = self.work / "net.toml"
        cfg.write_text(text)
        return cfg

    async def network_up(self, cfg: Path) -> None:
        from siftbus.client import Client

        brokers = {b: self.spawn(["broker", "--config", str(cfg), "--name", b, "-v"],
                                 self.work / f"{b}.log") for b in NAMES}
        degree = Counter([*PARENT, *PARENT.values()])
        end = time.monotonic() + 90  # start-up is slow on a loaded machine
        for b in NAMES:
            while True:
                if time.monotonic() > end:
                    raise TimeoutError(f"broker {b} not up with its links in 90 s")
                gone = [x for x, p in brokers.items() if p.poll() is not None]
                if gone:  # e.g. its port taken since free_port() (another run's)
                    raise PortTaken(f"broker {gone[0]} exited: "
                                    + (self.work / f"{gone[0]}.log").read_text()[-200:])
                try:
                    c = await Client.connect(port=self.ports[b], timeout=2)
                    try:
                        up = (await c.stats())["neighbours_up"]
                    finally:
                        await c.close()
                    if up >= degree[b]:
                        break
                except Exception:  # not listening yet, or its links not up
                    pass
                await asyncio.sleep(0.2)

    async def start_sub(self, sid: str) -> None:
        """Start ``sid``'s process at ``self.at[sid]`` and wait until it has subscribed
        (again on a refusal a restart cures: a claim while a link is not up)."""
        end = time.monotonic() + 60
        log = self.work / f"{sid}.log"
        while True:
            mark = log.read_text().count("subscribed ") if log.exists() else 0
            t0 = time.monotonic()
            b = self.at[sid]
            self.note(f"start {sid} at {b}")
            out = str(self.work / f"{sid}.jsonl")
            if self.mode == "app":
                p = self.spawn(["--app", f"{sid}:{self.tag}", "--port", str(self.ports[b]),
                                "--work", out],
                               log, script=True)
            else:
                p = self.spawn(["subscribe", "-b", f"127.0.0.1:{self.ports[b]}",
                                "--session", f"{sid}-{self.tag}", "--out", out,
                                f"f: {PROFILES[sid]}"], log)
            self.subs[sid] = p
            await self.subscribed(sid, b, mark, t0, end)
            if self.subs[sid] is p:
                return
            await asyncio.sleep(0.3)

    async def subscribed(self, sid: str, b: str, mark: int, t0: float, end: float) -> None:
        """Wait for the ``mark + 1``-th "subscribed" line of ``sid``'s log; on a refusal a
        restart cures, forget the process (``self.subs[sid]`` set to ``None``)."""
        log = self.work / f"{sid}.log"
        p = self.subs[sid]
        while True:
            while log.read_text().count("subscribed ") <= mark:
                if p.poll() is not None:
                    text = log.read_text()
                    if "connect again later" in text[-400:] and time.monotonic() < end:
                        self.subs[sid] = None  # type: ignore[assignment]
                        return
                    raise RuntimeError(f"{sid} exited {p.returncode}: {text[-300:]}")
                if time.monotonic() > end:
                    raise TimeoutError(f"{sid} not subscribed at {b} in 60 s")
                await asyncio.sleep(0.02)
            self.starts.append(time.monotonic() - t0)
            self.note(f"subscribed {sid} at {b}")
            return

    async def reattach(self, sid: str, to: str) -> None:
        """``--subs app``: the running process closes (or aborts, like a lost network)
        its connection and reconnects with its state at ``to``."""
        log = self.work / f"{sid}.log"
        p = self.subs[sid]
        how = self.rng.choice(["close", "abort"])
        again = self.rng.choice(["subscribe", "keep"])
        self.note(f"{how} {sid} at {self.at[sid]}, reconnect at {to} ({again})")
        mark = log.read_text().count("subscribed ")
        assert p.stdin is not None
        p.stdin.write(f"{how} {self.ports[to]} {again}\n".encode())
        p.stdin.flush()
        self.at[sid] = to
        t0 = time.monotonic()
        n = len(self.starts)
        await self.subscribed(sid, to, mark, t0, t0 + 60)
        if self.subs[sid] is None:
            raise RuntimeError(f"{sid} refused at {to}")
        self.reattaches.append(self.starts.pop(n))

    async def stop_sub(self, sid: str, crash: bool) -> None:
        p = self.subs[sid]
        self.note(f"{'kill -9' if crash else 'stop'} {sid} at {self.at[sid]}")
        p.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
        end = time.monotonic() + 20
        while p.poll() is None:
            if time.monotonic() > end:
                p.kill()
                raise TimeoutError(f"{sid} did not stop in 20 s")
            await asyncio.sleep(0.02)

    async def go(self) -> dict[str, Any]:
        from siftbus.client import Client
        from siftbus.client.session import SessionState
        from siftbus.model import Event, parse_schema

        t_type = parse_schema(SCHEMA)["T"]
        await self.network_up(self.config())
        await asyncio.gather(*(self.start_sub(sid) for sid in PROFILES))
        pubs = [await Client.connect(port=self.ports[b], session=SessionState(f"p{i}-{self.tag}"))
                for i, b in enumerate(["B3", "B2", "B4"][:self.publishers])]
        pub_at = ["B3", "B2", "B4"][:self.publishers]
        try:
            if self.pair == "adv":
                for pub in pubs:
                    await pub.advertise("T()")
            await asyncio.sleep(0.5)
            for _ in range(self.rounds):
                moves = []  # (session, to, crash, in-process reconnect)
                for sid in self.rng.sample(list(PROFILES), self.movers):
                    to = self.rng.choice([b for b in NAMES if b != self.at[sid]])
                    crash = self.rng.random() < self.kill
                    moves.append((sid, to, crash, self.mode == "app" and not crash))
                # the publishers' moves land within the restarts, whichever they are
                inside = all(m[3] for m in moves)
                took = self.reattaches if inside else self.starts
                est = statistics.median(took) if took else (0.05 if inside else 1.5)

                async def restart(sid: str, to: str, crash: bool, inside: bool) -> None:
                    if inside:
                        await self.reattach(sid, to)
                        return
                    await self.stop_sub(sid, crash)
                    await asyncio.sleep(self.rng.random() * 0.02)
                    self.at[sid] = to
                    await self.start_sub(sid)

                async def move_and_publish(i: int, p_to: str, delay: float) -> None:
                    await asyncio.sleep(delay)
                    self.note(f"move p{i} {pub_at[i]} -> {p_to}")
                    await pubs[i].move("127.0.0.1", self.ports[p_to], timeout=20)
                    pub_at[i] = p_to
                    first = 100_000 * i + 1 + sum(b // 100_000 == i
                                                  for b in self.sent + self.unsure)
                    rows = list(range(first, first + self.rng.randint(2, 8)))
                    self.note(f"p{i} publish at {p_to}: {rows}")
                    try:
                        await asyncio.wait_for(pubs[i].publish_batch(
                            [Event(t_type, (self.rng.randint(0, 50), b)) for b in rows],
                            ack=True), 20)
                    except Exception as exc:
                        self.unsure.extend(rows)
                        self.note(f"p{i} publish raised {type(exc).__name__}: {exc}")
                        return
                    self.sent.extend(rows)
                    self.note(f"p{i} acked {rows}")

                await asyncio.gather(*(restart(*m) for m in moves), *(
                    move_and_publish(i, self.rng.choice(NAMES), self.rng.random() * 1.2 * est)
                    for i in range(len(pubs))))
                await asyncio.sleep(self.rng.random() * 0.05)
        finally:
            for pub in pubs:
                try:
                    await asyncio.wait_for(pub.close(), 10)
                except Exception as exc:
                    self.note(f"publisher close: {type(exc).__name__}")
        end = time.monotonic() + 15
        want = set(self.sent)
        while time.monotonic() < end and any(
                not want <= {b for _, b in rows_of(self.work / f"{s}.jsonl")}
                for s in PROFILES):
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # a late duplicate would show now
        return self.verdict()

    def verdict(self) -> dict[str, Any]:
        want = set(self.sent)
        missing: dict[str, list[int]] = {}
        dups: dict[str, list[int]] = {}
        numbering: dict[str, str] = {}
        exited: dict[str, int] = {}
        for sid in PROFILES:
            rows = rows_of(self.work / f"{sid}.jsonl")
            got = Counter(b for _, b in rows)
            if want - set(got):
                missing[sid] = sorted(want - set(got))
            if any(c > 1 for c in got.values()):
                dups[sid] = sorted(b for b, c in got.items() if c > 1)
            nums = [n for n, _ in rows]
            if nums != list(range(1, len(nums) + 1)):
                numbering[sid] = f"n = {nums}"
            if self.subs[sid].poll() is not None:
                exited[sid] = self.subs[sid].returncode
        status = "LOSS" if missing else "DUP" if dups or numbering else "ok"
        return {"status": status, "missing": missing, "dups": dups,
                "numbering": numbering, "exited": exited, "sent": len(self.sent),
                "unsure": self.unsure, "start_s": round(statistics.median(self.starts or [0.0]), 2)}

    def stop_all(self) -> None:
        """Kill every child (the verdict is taken: nothing of theirs is needed now)."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(10)


def resume_point(out: Path) -> int:
    """The ``n`` of the last complete line of ``out`` (a cut last line removed), as
    ``siftbus subscribe --out`` reads it: its own function, imported here so that
    ``--code`` picks whose."""
    from siftbus.cli.broker import _resume_point

    return _resume_point(out)


async def app(sid: str, port: int, out: Path) -> None:
    """``--subs app``: a subscriber process that keeps its ``SessionState`` across its
    connections, as an application would (its rows in ``out`` with their ``n``, its
    progress read back from ``out`` when it starts). Each line on stdin, ``close PORT``
    or ``abort PORT`` (a lost network), ends its connection that way and reconnects
    with the state at PORT; ``... keep`` after it: without subscribing its profile
    again (the session keeps it)."""
    from siftbus.client import Client
    from siftbus.client.aio import Notification, event_json
    from siftbus.client.session import SessionState
    from siftbus.errors import RemoteError

    sid, tag = sid.split(":")
    state = SessionState(f"{sid}-{tag}", last=resume_point(out))
    sink = out.open("a", encoding="utf-8")

    def show(n: Notification) -> None:
        sink.write(f'{{"n": {n.n}, {event_json(n)[1:]}\n')
        sink.flush()  # in the file before the frame is acknowledged

    async def attach(to: int, again: bool = True) -> Client:
        end = time.monotonic() + 60
        while True:
            try:
                c = await Client.connect(port=to, session=state, reconnect=False)
                c.unclaimed_callback = show
                if again:
                    await c.subscribe(f"f: {PROFILES[sid]}", show)
                print(f"subscribed f at {c.broker} epoch {state.epoch}"
                      f"{'' if again else ' (kept)'}", flush=True)
                return c
            except RemoteError as exc:  # e.g. a link not up yet: again, as a user would
                print(f"refused: {exc}", flush=True)
                if time.monotonic() > end:
                    raise
                await asyncio.sleep(0.3)

    c = await attach(port)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().split():
        how, to, again = line[0], int(line[1]), line[2:] != ["keep"]
        if how == "abort" and c._conn is not None:
            c._conn.abort()
        await c.close()
        await asyncio.sleep(random.random() * 0.02)
        c = await attach(to, again)
    await c.close()
    sink.close()


def one(seed: int, pair: str, rounds: int, kill: float, work: Path, mode: str,
        publishers: int, movers: int) -> dict[str, Any]:
    """One run in this process (``--one``): its verdict, load and CPU."""
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    for attempt in range(3):
        run = Run(seed, pair, rounds, kill, work / f"try{attempt}", mode, publishers,
                  movers)
        run.work.mkdir()
        try:
            res = asyncio.run(asyncio.wait_for(run.go(), 240))
        except PortTaken:
            continue
        except BaseException as exc:  # reported as the run's outcome
            res = {"status": "ERROR", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        finally:
            run.stop_all()
            (run.work / "driver.log").write_text("\n".join(run.events) + "\n")
        break
    else:
        res = {"status": "ERROR", "error": "no free ports in 3 attempts"}
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                resource.RUSAGE_CHILDREN))
    res.update(seed=seed, pair=pair, load=round(load, 1), wall=round(time.monotonic() - t0, 1),
               cpu=round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 1))
    return res


LIVE: set[int] = set()
"""The process groups of the runs under way (killed whole if this process is stopped)."""


def stop_runs(signum: int, _frame: Any) -> None:
    for pgid in list(LIVE):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    os._exit(128 + signum)


def launch(seed: int, pair: str, label: str, src: str | None, a: argparse.Namespace,
           root: Path) -> dict[str, Any]:
    """One run as its own process group (its brokers and subscribers included), with
    ``PYTHONPATH=src`` for every process of it; the group is killed on a timeout."""
    mode = a.subs if a.subs != "both" else ("cli", "app")[seed % 2]
    work = root / f"{pair}-{seed}-{label}-{mode}"
    work.mkdir(parents=True)
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = str(Path(src).resolve())
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", f"{seed}:{pair}",
           "--rounds", str(a.rounds), "--kill", str(a.kill), "--work", str(work),
           "--subs", mode, "--publishers", str(a.publishers), "--movers", str(a.movers)]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    LIVE.add(p.pid)
    try:
        out, _ = p.communicate(timeout=300)
        res = json.loads(out.decode().strip().splitlines()[-1])
    except Exception as exc:  # a hung or broken run is reported
        res = {"status": "ERROR", "error": f"{type(exc).__name__}: {str(exc)[:200]}",
               "seed": seed, "pair": pair}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)  # whatever of the run's group is left
        p.wait(10)
        LIVE.discard(p.pid)
    res["code"] = label
    res["subs"] = mode
    res["dir"] = str(work)
    if res["status"] == "ok" and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


def groups(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        out.setdefault((r["pair"], r["subs"], r["code"]), []).append(r)
    return out


def median(rs: list[dict[str, Any]], key: str) -> float:
    xs = [r[key] for r in rs if key in r]
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default="cov,adv", help=f"comma-separated, of {', '.join(PAIRS)}")
    ap.add_argument("--runs", type=int, default=4, help="runs per pair (and code)")
    ap.add_argument("--seed", type=int, default=0, help="the first run's seed")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--kill", type=float, default=0.5,
                    help="chance a restart is a SIGKILL rather than SIGTERM")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once")
    ap.add_argument("--code", default="", help="LABEL=SRC,...: each run once per code, in "
                    "turns (default: this Python's siftbus)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where runs' logs go (bad runs' are kept; default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep good runs' logs too")
    ap.add_argument("--json", type=Path, default=None, help="append every run's result here")
    ap.add_argument("--subs", default="cli", choices=["cli", "app", "both"],
                    help="subscriber processes: siftbus subscribe (cli), a client keeping "
                    "its state across reconnects (app), or alternating per run (both)")
    ap.add_argument("--publishers", type=int, default=1, choices=[1, 2, 3],
                    help="session publishers, each moving and publishing every round")
    ap.add_argument("--movers", type=int, default=1, choices=[1, 2, 3],
                    help="subscribers restarted (or reconnected) at once each round")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--app", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        seed, pair = a.one.split(":")
        print(json.dumps(one(int(seed), pair, a.rounds, a.kill, a.work, a.subs,
                             a.publishers, a.movers)),
              flush=True)
        return 0
    if a.app:
        asyncio.run(app(a.app, a.port, a.work))
        return 0
    pairs = a.pairs.split(",")
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        ap.error(f"unknown --pairs {', '.join(unknown)} (have {', '.join(PAIRS)})")
    codes = [tuple(c.split("=", 1)) for c in a.code.split(",") if c] or [("this", None)]
    root = a.dir or Path(tempfile.mkdtemp(prefix="session_processes-"))
    jobs = [(a.seed + i, pair, label, src) for i in range(a.runs) for pair in pairs
            for label, src in codes]
    print(f"{len(jobs)} runs, logs under {root}", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop_runs)
    results: list[dict[str, Any]] = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as pool:
        for res in pool.map(lambda j: launch(*j, a, root), jobs):
            results.append(res)
            line = (f"{res['seed']} {res['pair']} {res['code']} {res['subs']} {res['status']}"
                    f" load {res.get('load')} wall {res.get('wall')} s cpu {res.get('cpu')} s")
            for k in ("missing", "dups", "numbering", "exited", "unsure", "error"):
                if res.get(k):
                    line += f" {k} {res[k]}"
            if res["status"] != "ok":
                line += f" logs {res['dir']}"
            print(line, flush=True)
            if a.json:
                with a.json.open("a") as f:
                    f.write(json.dumps(res) + "\n")
    print(f"\n{'pair':6} {'subs':4} {'code':6} {'runs':>5} {'LOSS':>5} {'DUP':>4} {'ERROR':>6}"
          f" {'wall s':>7} {'CPU s':>6} {'load':>5}")
    for (pair, subs, label), rs in groups(results).items():
        n = Counter(r["status"] for r in rs)
        print(f"{pair:6} {subs:4} {label:6} {len(rs):5} {n['LOSS']:5} {n['DUP']:4}"
              f" {n['ERROR']:6} {median(rs, 'wall'):7.1f} {median(rs, 'cpu'):6.1f}"
              f" {median(rs, 'load'):5.1f}")
    print(f"total wall {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if any(r["status"] != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
