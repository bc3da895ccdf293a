"""``siftbus demo``: a building's day through the Spark pipeline, alarms delivered live.

1. generate a day of building-automation events in Spark (seeded), as one JSON-lines file;
2. run the batch pipeline on ``local[*]`` against ``examples/building/profiles.txt``;
3. deliver the alarm notifications (security, janitors, facility) live: through a small
   siftbus broker network on 127.0.0.1 (three brokers in a line, subscribers' clients
   attached to different brokers) when the broker package is usable, else to files;
4. analyse the notification log (matches per event, per-subscriber load, hot profiles),
   save PNG plots, and print a summary table with where everything is.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from siftbus.errors import ConfigError, EnvironmentProblem
from siftbus.model import Profile, Schema

ALARM_SUBSCRIBERS = ("security", "janitor", "facility")
"""Subscribers (and ``janitor-floor*``) whose notifications count as alarms."""


STREAM_MEASURED = (
    "`siftbus pipeline stream --trigger 1` to a broker subscriber, measured "
    "(bench/spark_stream.py, 10,000 profiles, local[2], medians of 2 runs at load 11-15): "
    "2,000 events/s offered, 1,951 sustained from a socket (p50 1.3 s, p99 2.6 s) and 1,777 "
    "from a watched directory (p50 3.0 s, p99 5.5 s); before (3 runs, load 5-17), 643-826 "
    "(p50 17-28 s)")
"""What the streaming job's live delivery achieves (issue 33, target 4; docs/pipeline.md,
"Streaming latency"): the demo's own delivery is one batch for the whole day."""


def is_alarm_subscriber(owner: str) -> bool:
    return owner in ALARM_SUBSCRIBERS or owner.startswith("janitor-")


def find_examples(start: Path | None = None) -> Path:
    """``examples/building`` of this checkout (searched upwards from cwd and the package)."""
    here = Path(__file__).resolve()
    candidates = [start] if start else []
    candidates += [Path.cwd(), *Path.cwd().parents, *here.parents]
    for base in candidates:
        if base is None:
            continue
        d = base / "examples" / "building"
        if (d / "schema.toml").is_file() and (d / "profiles.txt").is_file():
            return d
    raise ConfigError("cannot find examples/building (schema.toml and profiles.txt); run the "
                      "demo from the siftbus checkout or pass --examples DIR")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveNetwork:
    """A broker network in this process (one asyncio loop in a thread) plus subscribers."""

    schema: Schema
    brokers: dict[str, int] = field(default_factory=dict)
    received: dict[str, int] = field(default_factory=dict)
    received_at: list[float] = field(default_factory=list)
    """The wall-clock time (``time.time()``) of every notification received."""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _servers: list[Any] = field(default_factory=list)
    _clients: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    config: Any = None
    """The network's :class:`~siftbus.broker.config.NetworkConfig` once started."""
    _closers: list[Callable[[], Any]] = field(default_factory=list)

    def run(self, make: Callable[[], Any], timeout: float = 60.0) -> Any:
        """Run the coroutine ``make()`` in the network's event loop; its result. (The
        CLI starts the gateway beside the brokers this way.)"""
        assert self._loop is not None, "network not started"

        async def call() -> Any:
            return await make()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    def on_close(self, make: Callable[[], Any]) -> None:
        """Run the coroutine ``make()`` in the loop before the brokers stop."""
        self._closers.append(make)

    def start(self, names: Sequence[str] = ("B0", "B1", "B2")) -> None:
        from siftbus.broker.config import parse_network

        ports = {n: _free_port() for n in names}
        lines = ["[network]", 'protocol = "forwarding"', 'strategy = "covering"', ""]
        for i, n in enumerate(names):
            lines += [f"[brokers.{n}]", 'host = "127.0.0.1"', f"port = {ports[n]}"]
            if i:
                lines.append(f'neighbours = ["{names[i - 1]}"]')
            lines.append("")
        net = parse_network("\n".join(lines), schema=self.schema)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="siftbus-demo-brokers")
        self._thread.start()

        async def up() -> None:
            for n in names:
                server = net.server(n)
                await server.start()
                self._servers.append(server)
            for server in self._servers:
                await server.wait_neighbours(30)

        asyncio.run_coroutine_threadsafe(up(), self._loop).result(60)
        self.brokers = ports
        self.config = net

    def subscribe(self, owner: str, profiles: Sequence[Profile], broker: str, *,
                  on_note: Callable[[Any], None] | None = None) -> None:
        """Attach ``owner``'s client to ``broker``; ``on_note`` also sees each
        notification (in the client's thread)."""
        from siftbus.client import SyncClient

        c = SyncClient.connect("127.0.0.1", self.brokers[broker], name=owner)
        self._clients.append(c)

        def got(note: Any) -> None:
            now = time.time()
            with self._lock:
                self.received[owner] = self.received.get(owner, 0) + 1
                self.received_at.append(now)
            if on_note is not None:
                on_note(note)

        for p in profiles:
            c.subscribe(p, got, id=p.id)

    def wait_for(self, expected: dict[str, int], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(self.received.get(k, 0) >= v for k, v in expected.items()):
                    return True
            time.sleep(0.1)
        return False

    def close(self) -> None:
        for c in self._clients:
            with contextlib.suppress(Exception):
                c.close()
        if self._loop is not None:
            async def down() -> None:
                for make in self._closers:
                    with contextlib.suppress(Exception):
                        await make()
                for s in self._servers:
                    with contextlib.suppress(Exception):
                        await s.close()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(down(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            self._loop.close()


@contextlib.contextmanager
def live_network(schema: Schema, alarm_profiles: dict[str, list[Profile]],
                 mode: str) -> Iterator[LiveNetwork | None]:
    """The broker network with the alarm subscribers attached, or ``None`` (files)."""
    if mode == "files":
        yield None
        return
    net = LiveNetwork(schema)
    try:
        net.start()
        names = list(net.brokers)
        for i, (owner, profiles) in enumerate(sorted(alarm_profiles.items())):
            net.subscribe(owner, profiles, names[i % len(names)])
    except Exception as exc:
        net.close()
        if mode == "broker":
            raise EnvironmentProblem(f"cannot start the demo broker network: {exc}") from exc
        yield None
        return
    try:
        yield net
    finally:
        net.close()


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo did, for the summary and for tests."""

    out: Path
    events: int
    report: Any
    analysis: Any
    delivery: str
    alarms_sent: dict[str, int]
    alarms_received: dict[str, int] | None
    seconds: dict[str, float]
    log_file: Path | None = None
    """Where Spark's own messages went (``None``: the terminal)."""
    run: str = ""
    """What was run, as the plots' captions name it."""
    composites: Any = None
    """The composite step's :class:`~siftbus.spark.composite_demo.CompositeDemo`."""
    match_seconds: float | None = None
    latency: tuple[float, float] | None = None
    """p50 and p99 seconds from the day's file written to an alarm at its subscriber
    (live broker delivery only)."""
    """Wall seconds of ``siftbus match`` on the same files (one process), for comparison."""


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (shorter to read)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _say(say: Callable[[str], None] | None, text: str) -> None:
    if say is not None:
        say(text)


def _alarm_names(alarm_profiles: dict[str, list[Profile]]) -> str:
    names = sorted(o for o in alarm_profiles if not o.startswith("janitor-"))
    floors = len(alarm_profiles) - len(names)
    return ", ".join(names) + (f" and {floors} floor janitors" if floors else "")


STEPS = 5
"""Steps the demo announces: start Spark, generate, match and deliver, analyse, and the
composite profiles."""


def run_demo(out: str | Path = "demo-out", *, seed: int = 42, scale: float = 1.0,
             master: str = "local[*]", live: str = "auto", examples: Path | None = None,
             on_live: Callable[[LiveNetwork], None] | None = None,
             progress: bool = True, say: Callable[[str], None] | None = None,
             log_file: str | Path | None = None) -> DemoResult:
    """Run the whole demo; returns its figures (the CLI prints them).

    ``say`` receives what the demo is about to do: first the plan and how long it takes,
    then one line as each step starts. ``log_file`` (default ``OUT/spark.log``) receives
    Spark's own messages when this call starts the JVM. ``on_live`` is called with the
    live broker network once it is up (not with file delivery).
    """
    from siftbus.lang.profile import load_profiles
    from siftbus.model import load_schema
    from siftbus.spark.analysis import analyze_output
    from siftbus.spark.delivery import FileDeliverer
    from siftbus.spark.match_stage import index_available
    from siftbus.spark.pipeline import Pipeline, standard_sinks
    from siftbus.spark.progress import job_step, spark_progress
    from siftbus.spark.session import SparkSettings, build_session
    from siftbus.spark.sinks import DeliverySink, Sink
    from siftbus.spark.sources import read_json_lines
    from siftbus.spark.subscriptions import ProfileFile, SubscriptionSet
    from siftbus.spark.workload import BuildingDay, building_day, write_day

    if live not in ("auto", "broker", "files"):
        raise ConfigError(f"--live must be auto, broker or files, not {live!r}", field="live")
    ex = examples or find_examples()
    o = Path(out).resolve()
    o.mkdir(parents=True, exist_ok=True)
    log = Path(log_file).resolve() if log_file is not None else o / "spark.log"
    times: dict[str, float] = {}
    schema = load_schema(ex / "schema.toml")
    profiles = load_profiles(ex / "profiles.txt", schema)
    alarm_profiles: dict[str, list[Profile]] = {}
    for p in profiles:
        if is_alarm_subscriber(p.owner):
            alarm_profiles.setdefault(p.owner, []).append(p)
    day = BuildingDay().scaled(scale)
    profiles_name = shown(ex / "profiles.txt")
    run = (f"siftbus demo, seed {seed}, scale {scale:g}, profiles {profiles_name} "
           f"({len(profiles):,})")
    _say(say, "\n".join([
        "siftbus demo: one day of a building's sensors, matched on Spark.",
        f"  1. start Spark on {master} (its own messages go to {shown(log)})",
        f"  2. generate the day: {day.expected_events():,} events (seed {seed}): "
        "temperatures, lamps, motion, windows, buttons, three glass breaks",
        f"  3. match every event against the {len(profiles):,} profiles of {profiles_name} "
        f"and deliver the alarms (to {_alarm_names(alarm_profiles)}) live through three "
        "brokers on 127.0.0.1",
        "  4. analyse the notifications and draw three plots",
        f"  5. find the patterns of {shown(ex / 'composites.txt')} in event time (the "
        "security alarm: glass breaking, then motion in the room; the heating fault), on "
        "Spark and in the broker's engine",
        "About a minute on an idle 2-core machine, longer on a busy one: most of it is "
        "starting Spark and its Python workers (each compiles the matcher once) and "
        "writing the notifications.",
    ]))

    _say(say, f"[1/{STEPS}] starting Spark on {master} ...")
    t0 = time.perf_counter()
    spark = build_session(SparkSettings(master=master, app_name="siftbus-demo",
                                        shuffle_partitions=4, log_file=str(log)))
    times["start Spark"] = time.perf_counter() - t0

    _say(say, f"[2/{STEPS}] generating {day.expected_events():,} events of the day ...")
    t0 = time.perf_counter()
    events_file = o / "events" / "building-day.jsonl"
    with spark_progress(spark, enabled=progress), \
            job_step(spark, "generating a day of building events"):
        n_events = write_day(building_day(spark, schema, seed=seed, day=day), events_file)
    arrived = time.time()  # the day's file is there: the clock of live delivery starts
    times["generate events"] = time.perf_counter() - t0

    engine = "index" if index_available() else "reference"
    subs = SubscriptionSet(schema, ProfileFile(ex / "profiles.txt"), engine=engine)
    with live_network(schema, alarm_profiles, live) as net:
        if net is not None and on_live is not None:
            on_live(net)  # e.g. the CLI starts the gateway and its dashboard here
        if net is not None:
            from siftbus.spark.delivery import BrokerDeliverer

            deliverer: Any = BrokerDeliverer("127.0.0.1", net.brokers["B1"],
                                             name="spark-pipeline")
            delivery = (f"live through a broker network of {len(net.brokers)} brokers on "
                        f"127.0.0.1 (ports {', '.join(map(str, net.brokers.values()))})")
        else:
            deliverer = FileDeliverer(o / "alarms")
            delivery = f"to files under {shown(o / 'alarms')} (broker network not used)"
        live_sink = DeliverySink(deliverer, subscribers=list(alarm_profiles))
        sinks: list[Sink] = [*standard_sinks(o), live_sink]
        pipe = Pipeline(spark, schema, subs, sinks)
        _say(say, f"[3/{STEPS}] matching {n_events:,} events against {len(subs):,} profiles "
                  f"and delivering the alarms {delivery} ...")
        t0 = time.perf_counter()
        try:
            with spark_progress(spark, enabled=progress):
                report = pipe.run(read_json_lines(spark, [events_file]))
        finally:
            pipe.close()
        times["pipeline (parse, match, sinks, delivery)"] = time.perf_counter() - t0
        match_seconds = one_process_match(ex, events_file, o / "match-one-process.jsonl")
        sent = dict(next(r for r in report.sinks if r.sink == "delivery").detail)
        received: dict[str, int] | None = None
        latency = None
        if net is not None:
            net.wait_for(sent, timeout=30)
            received = dict(net.received)
            if net.received_at:
                p50, p99 = np.percentile(np.asarray(net.received_at) - arrived, [50, 99],
                                         method="inverted_cdf")
                latency = (float(p50), float(p99))
    _say(say, f"[4/{STEPS}] analysing the notifications and drawing plots ...")
    t0 = time.perf_counter()
    with spark_progress(spark, enabled=progress):
        analysis = analyze_output(spark, o, o / "plots", run=run)
    times["analysis and plots"] = time.perf_counter() - t0
    from siftbus.spark.composite_demo import run_composites

    _say(say, f"[5/{STEPS}] finding the composite profiles' patterns in the day ...")
    t0 = time.perf_counter()
    with spark_progress(spark, enabled=progress), \
            job_step(spark, "composite profiles over the day"):
        composites = run_composites(building_day(spark, schema, seed=seed, day=day), schema, ex)
    times["composite profiles (Spark, then the broker's engine)"] = time.perf_counter() - t0
    return DemoResult(o, n_events, report, analysis, delivery, sent, received, times,
                      log if log.is_file() else None, run, composites, match_seconds,
                      latency)


def one_process_match(examples: Path, events: Path, out: Path) -> float | None:
    """Wall seconds of ``siftbus match`` on the demo's files, run as a user runs it (a
    fresh process), so the summary can show what Spark costs and buys at this size;
    ``None`` when it fails (the demo goes on)."""
    import subprocess
    import sys

    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema",
                        str(examples / "schema.toml"), "--profiles",
                        str(examples / "profiles.txt"), "--events", str(events), "--out",
                        str(out)], capture_output=True, timeout=600, check=False)
    return time.perf_counter() - t0 if r.returncode == 0 else None


def summary_rows(result: DemoResult) -> list[tuple[str, str]]:
    """The demo's figures in plain words, (label, value); Bittner's names for the three
    ratios in parentheses."""
    r = result.report
    a = result.analysis
    share = r.matched_events / r.events if r.events else 0.0
    return [
        ("events generated", f"{result.events:,}"),
        ("events processed (parsed, checked, matched)", f"{r.events:,}"),
        ("events that matched a profile (p^e)", f"{r.matched_events:,} ({share:.1%})"),
        ("bad records (dead letters)", f"{r.bad:,}"),
        ("profiles (subscriptions)", f"{r.profiles:,}"),
        ("notifications (event, profile pairs)", f"{r.notifications:,}"),
        ("profiles matched per event, mean (p^p)", f"{a.p_p:.2f}"),
        ("... per event that matched, mean (sigma)", f"{a.sigma:.2f}"),
    ]


def speed_rows(result: DemoResult) -> list[tuple[str, str]]:
    """Events per second of the Spark job beside ``siftbus match`` on the same files."""
    rows = []
    job = result.report.seconds
    if job > 0:
        rows.append(("events/s, Spark pipeline (with sinks)",
                     f"{result.report.events / job:,.0f}"))
    if result.match_seconds:
        rows.append(("events/s, siftbus match, same files",
                     f"{result.events / result.match_seconds:,.0f}"))
    return rows


def print_demo(result: DemoResult) -> None:
    """The summary tables and where the outputs are."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    a = result.analysis
    t = Table(title="siftbus demo: one day in a building",
              caption="p^e, p^p and sigma are the names Bittner (2003) gives these ratios")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for label, value in summary_rows(result):
        t.add_row(label, value)
    for label, secs in result.seconds.items():
        t.add_row(f"time: {label}", f"{secs:.1f} s")
    for label, value in speed_rows(result):
        t.add_row(label, value)
    console.print(t)

    s = Table(title="busiest subscribers")
    s.add_column("subscriber")
    s.add_column("notifications", justify="right")
    for sub, n in a.subscribers[:8]:
        s.add_row(sub, f"{n:,}")
    console.print(s)

    al = Table(title=f"alarms delivered {result.delivery}")
    al.add_column("subscriber")
    al.add_column("sent by the pipeline", justify="right")
    al.add_column("received by the subscriber", justify="right")
    total_sent = total_got = 0
    for sub in sorted(set(result.alarms_sent) | set(result.alarms_received or {})):
        n = result.alarms_sent.get(sub, 0)
        got = "(file)" if result.alarms_received is None else \
            f"{result.alarms_received.get(sub, 0):,}"
        total_sent += n
        total_got += 0 if result.alarms_received is None else \
            result.alarms_received.get(sub, 0)
        al.add_row(sub, f"{n:,}", got)
    console.print(al)
    if result.alarms_received is not None:
        verdict = "all received" if total_got == total_sent else \
            f"MISMATCH: {total_got:,} received of {total_sent:,}"
        console.print(f"live delivery: {total_sent:,} alarm notifications sent, {verdict}")
    if result.latency is not None:
        p50, p99 = result.latency
        console.print(f"live delivery latency, the day's file written -> an alarm at its "
                      f"subscriber: p50 {p50:.1f} s, p99 {p99:.1f} s (one batch job: the whole "
                      "day is one batch; `siftbus pipeline stream` delivers at each trigger, "
                      "see docs/pipeline.md)", soft_wrap=True)
    console.print(STREAM_MEASURED, soft_wrap=True)
    o = result.out
    console.print("\n[bold]outputs[/bold]")
    for label, path in (("events", o / "events" / "building-day.jsonl"),
                        ("notifications (Parquet, by subscriber)", o / "notifications"),
                        ("matches per event (JSON lines)", o / "matches.jsonl"),
                        ("per-subscriber counts", o / "counts.json"),
                        ("dead letters", o / "dead_letters.jsonl")):
        console.print(f"  {label}: {shown(path)}", soft_wrap=True)
    if result.alarms_received is None:
        console.print(f"  alarm deliveries: {shown(o / 'alarms')}", soft_wrap=True)
    if result.log_file is not None:
        console.print(f"  Spark's own messages: {shown(result.log_file)}", soft_wrap=True)
    console.print("[bold]plots[/bold] (captioned with the run and its totals)")
    for p in a.plots:
        console.print(f"  {shown(Path(p))}", soft_wrap=True)
    from siftbus.spark.composite_demo import print_composites

    print_composites(result.composites)


__all__ = [
    "ALARM_SUBSCRIBERS",
    "DemoResult",
    "find_examples",
    "one_process_match",
    "print_demo",
    "run_demo",
    "shown",
    "speed_rows",
    "summary_rows",
]
