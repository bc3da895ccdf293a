"""Ingest benchmark: every target of issue 15 as a user runs it, each beside a baseline
measured in the same run, with CPU seconds, rates, RSS and the load average.

    python bench/ingest.py --quick     # 200k profiles, 200k events (a few minutes)
    python bench/ingest.py             # 1M profiles, 1M events, 100k x 1M end to end

Sections (each in its own process, so that its RSS is its own; standard workload of
``bench/workload.py``: one type with 10 int attributes 0..999 and 2 enums, 1-5
conditions, about 5 matches per event at every size):

``profiles``
    the profile file -> a matcher holding every profile, as ``siftbus match`` does it
    (:func:`siftbus.cli.match.load_matcher`: parse, validate, normalise, add): profiles
    per CPU-second, RSS growth per profile kept, peak RSS. Baseline: the lark parser and
    per-profile ``add`` (the specification's path, as ``parse_profile`` gives it) on a
    sample, and the bytes a kept :class:`~siftbus.model.Profile` costs (in a
    ``ReferenceMatcher``).
``events``
    the event file -> validated key columns, as ``siftbus match`` reads it: events per
    CPU-second. Baseline: a stdlib loop doing ``json.loads`` per line and nothing else.
``end_to_end``
    ``siftbus match`` as a subprocess on 100,000 profiles x the event file, JSON lines
    out (and Parquet): CPU seconds of the child, events per CPU-second. Baseline: the
    library used per event (``parse_event`` then ``matcher.match`` per line, ids written
    with ``json.dumps``) on a sample, and the kernel alone on the same events (the
    ceiling).
``parquet``
    the Parquet writer alone on the CSR rows of the event file at 100,000 profiles, per
    compression codec (snappy, the default; none; zstd): CPU seconds and file size.
    Baseline: the previous writer (ids taken as strings, no dictionary).
``startup``
    ``siftbus match`` on a tiny input (20 profiles, 20 events), median of repeats.
    Baselines: ``python -c pass`` and ``siftbus --version``.
``per_event``
    ``matcher.match(event)`` at 100,000 profiles (the broker's and channel's path).
    Baseline: the plain Python loop over per-profile tuples (``bench/matcher.py``). Also
    the reference matcher (``bench/matcher.py``'s oracle) on the same events, to say
    whether it is slower than the plain loop (it is: so ratios use the plain loop).
``broker_sub``
    a broker (``BrokerNode``, no transport) handling one SUB frame of 100,000 profiles
    (the structured form; ``Limits.max_profiles`` raised), from frame to ACK and to its
    first matched event (the index compiles then): the set-up time. Baselines: the same
    frame with the covering table filled one profile at a time (no bulk poset insert);
    on a sample, one frame of the sample, and the sample one profile per frame.
``restart``
    a broker (``BrokerNode`` with a ``ProfileStore``, no transport) starting on a store of
    100,000 profiles of 100 clients, to its first matched event and one full collection
    (so that a collection the start put off is counted): CPU seconds split into
    reading the store (``ProfileStore.load``: the compiled scanner, the grammar for what
    it leaves) and re-subscribing (``ClientProfiles.restore``: one bulk table step), and
    profiles per CPU-second; and the CPU time of Python's cyclic collector within the
    whole (``gc.callbacks``: its collections land in whichever step makes objects next).
    Baseline, same run, alternating, median of ``--repeats``: the previous path
    (``parse_profile`` per row, then one ``subscribe_all`` per profile).
``spark_parse``
    the Spark pipeline's parse stage (``parse_text_batch``, no JVM) on 100,000 lines.
    Baseline: the same stage with ``parse_event`` on every line.
``spark_profiles``
    a Spark job's profile file loaded (strict) as its ``SubscriptionSet`` does, on a
    sample. Baseline: ``load_profiles`` (the lark grammar, line by line).

Kernels are numba unless ``SIFTBUS_KERNELS`` says otherwise (``startup`` runs the
default, ``auto``). Rates are CPU time of the measured process (or child); wall time is
reported beside it, as the machine is shared.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

SIFTBUS = [sys.executable, "-m", "siftbus"]
TARGETS = {
    "profiles_per_cpu_s": 200_000,
    "bytes_per_profile": 300,
    "rss_1m_mb": 600,
    "events_per_cpu_s": 1_000_000,
    "e2e_events_per_cpu_s": 200_000,
    "startup_s": 0.4,
    "per_event_ev_s": 150_000,
}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> float:
    return os.getloadavg()[0]


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``(result, cpu s, wall s)`` of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


# -- data ---------------------------------------------------------------------------------


def ensure_data(data: Path, n_profiles: int, n_events: int) -> dict[str, Path]:
    """Standard profile and event files (generated once, reused by later runs)."""
    from siftbus.spark.workload import standard_schema_toml

    data.mkdir(parents=True, exist_ok=True)
    schema = data / "schema.toml"
    if not schema.exists():
        schema.write_text(standard_schema_toml(1))
    paths = {"schema": schema}
    for n in sorted({n_profiles, 100_000, 20}):
        p = data / f"profiles-{n}.txt"
        if not p.exists():
            subprocess.run([sys.executable, __file__, "--make-profiles", str(n), "--to", str(p)],
                           check=True)
        paths[f"profiles-{n}"] = p
    for n in sorted({n_events, 20}):
        e = data / f"events-{n}.jsonl"
        if not e.exists():
            subprocess.run([sys.executable, __file__, "--make-events", str(n), "--to", str(e)],
                           check=True)
        paths[f"events-{n}"] = e
    return paths


def make_profiles(n: int, to: Path) -> None:
    from siftbus.lang.profile import format_profile
    from workload import standard_profiles

    tmp = to.with_suffix(".part")
    with tmp.open("w") as f:
        for p in standard_profiles(n):
            f.write(format_profile(p) + "\n")
    tmp.replace(to)


def make_events(n: int, to: Path) -> None:
    from workload import standard_event_keys, standard_schema

    etype = standard_schema().types[0]
    keys = standard_event_keys(n)
    labels = [a.domain.labels if hasattr(a.domain, "labels") else None  # type: ignore[union-attr]
              for a in etype.attributes]
    names = [a.name for a in etype.attributes]
    tmp = to.with_suffix(".part")
    with tmp.open("w") as f:
        for row in keys.tolist():
            parts = [f'"type": "{etype.name}"']
            for name, lab, k in zip(names, labels, row, strict=True):
                parts.append(f'"{name}": "{lab[k]}"' if lab else f'"{name}": {k}')
            f.write("{" + ", ".join(parts) + "}\n")
    tmp.replace(to)


# -- sections (each runs in a child process) ----------------------------------------------


def section_profiles(paths: dict[str, Path], n: int, sample: int) -> dict[str, Any]:
    from siftbus.cli.match import load_matcher
    from siftbus.lang.profile import parse_profile
    from siftbus.match.index import IndexMatcher
    from siftbus.match.reference import ReferenceMatcher
    from siftbus.model import load_schema

    schema = load_schema(paths["schema"])
    path = paths[f"profiles-{n}"]
    warm = load_matcher(schema, paths["profiles-20"])  # kernels loaded before timing
    warm.match_batch([])
    del warm
    gc.collect()
    rss0 = rss_mb()
    m, cpu, wall = timed(lambda: load_matcher(schema, path))
    gc.collect()
    rss1 = rss_mb()
    res: dict[str, Any] = {
        "profiles": n, "cpu_s": cpu, "wall_s": wall, "profiles_per_cpu_s": n / cpu,
        "rss_before_mb": rss0, "rss_mb": rss1, "peak_rss_mb": peak_mb(),
        "bytes_per_profile": (rss1 - rss0) * 2**20 / n, "load": load()}
    del m
    gc.collect()
    # Baseline 1: the specification's path, one line at a time, on a sample.
    lines = path.read_text().splitlines()[:sample]
    base = IndexMatcher()

    def per_line() -> None:
        for i, line in enumerate(lines, start=1):
            base.add(parse_profile(line, schema, line=i))
        base.match_batch([])

    _, bcpu, _ = timed(per_line)
    res["baseline_per_line_profiles_per_cpu_s"] = len(lines) / bcpu
    res["baseline_sample"] = len(lines)
    # Baseline 2: what a kept Profile object costs.
    profiles = [parse_profile(line, schema) for line in lines]
    gc.collect()
    r0 = rss_mb()
    ref = ReferenceMatcher()
    for p in profiles:
        ref.add(p)
    gc.collect()
    # the Profile objects are kept by the matcher: their cost is the RSS they hold
    res["baseline_profile_object_bytes"] = _object_bytes(profiles) / len(profiles)
    res["baseline_reference_matcher_growth_bytes"] = (rss_mb() - r0) * 2**20 / len(profiles)
    return res


def _object_bytes(profiles: list[Any]) -> int:
    """Bytes of the objects reachable from ``profiles`` (shared objects counted once)."""
    seen: set[int] = set()
    total = 0
    stack: list[Any] = list(profiles)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, (tuple, list, frozenset, set)):
            stack.extend(o)
        elif hasattr(o, "__slots__"):
            stack.extend(getattr(o, s) for s in o.__slots__ if hasattr(o, s)
                         and s not in ("etype",))
    return total


def section_events(paths: dict[str, Path], n: int) -> dict[str, Any]:
    from siftbus.match.ingest import read_event_chunks
    from siftbus.model import load_schema

    schema = load_schema(paths["schema"])
    path = paths[f"events-{n}"]
    for _ in read_event_chunks(paths["events-20"], schema):  # scanners loaded before timing
        pass

    def to_columns() -> int:
        return sum(chunk.n for chunk in read_event_chunks(path, schema))

    rows, cpu, wall = timed(to_columns)
    assert rows == n

    def plain() -> int:
        k = 0
        with path.open("rb") as f:
            for line in f:
                json.loads(line)
                k += 1
        return k

    _, bcpu, _ = timed(plain)
    return {"events": n, "cpu_s": cpu, "wall_s": wall, "events_per_cpu_s": n / cpu,
            "baseline_json_loads_events_per_cpu_s": n / bcpu, "baseline_cpu_s": bcpu,
            "load": load()}


def _child_run(cmd: list[str]) -> tuple[float, float, float]:
    """(cpu s, wall s, peak RSS MB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - w0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, after.ru_maxrss / 1024


def section_end_to_end(paths: dict[str, Path], n_events: int, sample: int,
                       out_dir: Path) -> dict[str, Any]:
    import numpy as np

    from siftbus.cli.match import load_matcher
    from siftbus.match.cells import events_to_columns
    from siftbus.model import load_schema, parse_event

    args = ["match", "--schema", str(paths["schema"]), "--profiles",
            str(paths["profiles-100000"]), "--events", str(paths[f"events-{n_events}"])]
    res: dict[str, Any] = {"profiles": 100_000, "events": n_events}
    for fmt, suffix in (("json", ".jsonl"), ("parquet", ".parquet")):
        out = out_dir / f"e2e{suffix}"
        cpu, wall, peak = _child_run([*SIFTBUS, *args, "--out", str(out)])
        res[fmt] = {"cpu_s": cpu, "wall_s": wall, "peak_rss_mb": peak,
                    "events_per_cpu_s": n_events / cpu, "load": load()}
    # Baselines on a sample: the library per event, and the kernel alone (the ceiling).
    schema = load_schema(paths["schema"])
    m = load_matcher(schema, paths["profiles-100000"])
    with paths[f"events-{n_events}"].open() as f:
        lines = [next(f) for _ in range(sample)]
    sink: list[str] = []

    def per_event() -> None:
        for i, line in enumerate(lines):
            ids = m.match(parse_event(line, schema))
            sink.append(json.dumps({"event": i, "matches": ids}))

    m.match(parse_event(lines[0], schema))
    _, cpu, _ = timed(per_event)
    res["baseline_per_event_events_per_cpu_s"] = sample / cpu
    events = [parse_event(line, schema) for line in lines]
    cols = events_to_columns(events[0].etype, events)
    snap = m.snapshot()  # type: ignore[attr-defined]
    snap.match_columns(events[0].etype.name, cols)
    reps = []
    for _ in range(3):
        _, cpu, _ = timed(lambda: snap.match_columns(events[0].etype.name, cols))
        reps.append(sample / cpu)
    res["kernel_only_events_per_cpu_s"] = statistics.median(reps)
    res["matches_per_event"] = float(np.diff(
        snap.match_columns(events[0].etype.name, cols).offsets).mean())
    return res


def section_parquet(paths: dict[str, Path], n_events: int, repeats: int,
                    out_dir: Path) -> dict[str, Any]:
    """The Parquet writer alone (``ParquetMatchWriter``: dictionary-typed id lists, row
    groups of up to 1Mi events) on the CSR rows of the event file at 100,000 profiles,
    per compression codec: CPU seconds and file size, median of ``repeats``, codecs
    alternating. Baseline, same run: the previous writer (each match's id taken as a
    string into a ``list<string>`` column, no dictionary, a row group per chunk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from siftbus.cli import match as cli
    from siftbus.match.ingest import read_event_chunks
    from siftbus.model import load_schema

    schema = load_schema(paths["schema"])
    m = cli.load_matcher(schema, paths["profiles-100000"])

    class Keep(cli.MatchWriter):
        def __init__(self) -> None:
            self.parts: list[tuple[int, Any, Any]] = []
            self.snap: Any = None

        def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Any) -> None:
            self.parts.append((first, offsets.copy(), profiles.copy()))
            self.snap = snap

        def write_rows(self, first: int, rows: Any) -> None:
            raise AssertionError("the index engine has snapshots")

    keep = Keep()
    for chunk in read_event_chunks(paths[f"events-{n_events}"], schema):
        cli.match_and_write(m, chunk, keep)
    strings = pa.schema([("event", pa.int64()), ("matches", pa.list_(pa.string()))])

    def previous(path: Path) -> None:
        w = pq.ParquetWriter(str(path), strings, use_dictionary=False)
        ids = pa.array(keep.snap.profile_ids, pa.string())
        for first, off, prof in keep.parts:
            w.write_table(pa.Table.from_arrays([
                pa.array(range(first, first + len(off) - 1), pa.int64()),
                pa.ListArray.from_arrays(pa.array(off.astype("int32")),
                                         ids.take(pa.array(prof)))], schema=strings))
        w.close()

    def new(codec: str) -> Callable[[Path], None]:
        def run(path: Path) -> None:
            w = cli.ParquetMatchWriter(path, compression=codec)
            for first, off, prof in keep.parts:
                w.write_csr(first, off, prof, keep.snap)
            w.close()
        return run

    writers = {"snappy": new("snappy"), "none": new("none"), "zstd": new("zstd"),
               "previous (list<string>, snappy)": previous}
    runs: dict[str, list[float]] = {k: [] for k in writers}
    sizes: dict[str, int] = {}
    want = None
    for _ in range(repeats):
        for name, fn in writers.items():
            path = out_dir / "codec.parquet"
            _, cpu, _ = timed(lambda fn=fn, path=path: fn(path))  # type: ignore[misc]
            runs[name].append(cpu)
            sizes[name] = path.stat().st_size
            got = pq.read_table(path)
            want = got if want is None else want
            assert got.equals(want), f"{name} wrote other rows"
    return {"events": n_events, "load": load(), "codecs": {
        k: {"cpu_s": statistics.median(v), "all_runs": v, "bytes": sizes[k]}
        for k, v in runs.items()}}


def section_startup(paths: dict[str, Path], repeats: int) -> dict[str, Any]:
    tiny = ["match", "--schema", str(paths["schema"]), "--profiles",
            str(paths["profiles-20"]), "--events", str(paths["events-20"])]
    runs: dict[str, list[tuple[float, float]]] = {"match": [], "version": [], "python": []}
    env_cmds = {"match": [*SIFTBUS, *tiny], "version": [*SIFTBUS, "--version"],
                "python": [sys.executable, "-c", "pass"]}
    for _ in range(repeats):
        for name, cmd in env_cmds.items():
            cpu, wall, _ = _child_run(cmd)
            runs[name].append((cpu, wall))
    out: dict[str, Any] = {"repeats": repeats, "load": load()}
    for name, xs in runs.items():
        out[f"{name}_cpu_s"] = statistics.median(c for c, _ in xs)
        out[f"{name}_wall_s"] = statistics.median(w for _, w in xs)
    return out


def section_per_event(paths: dict[str, Path], n_events: int, repeats: int) -> dict[str, Any]:
    from matcher import PlainLoop
    from siftbus.cli.match import load_matcher
    from siftbus.lang.profile import parse_profiles
    from siftbus.match import ReferenceMatcher, add_all
    from siftbus.model import load_schema, parse_event

    schema = load_schema(paths["schema"])
    m = load_matcher(schema, paths["profiles-100000"])
    with paths[f"events-{n_events}"].open() as f:
        events = [parse_event(next(f), schema) for _ in range(min(n_events, 20_000))]
    m.match(events[0])
    rates = []

    def each() -> int:
        # each answer used and dropped, as a broker or a channel does: keeping all
        # 20,000 lists set off a full collection of the whole heap in the first
        # repeat (~30% of that repeat), which a server never pays per event
        found = 0
        for e in events:
            found += len(m.match(e))
        return found

    for _ in range(repeats):
        _, cpu, _ = timed(each)
        rates.append(len(events) / cpu)
    parsed = parse_profiles(paths["profiles-100000"].read_text(), schema)
    loop = PlainLoop(parsed)
    ref = add_all(ReferenceMatcher(), parsed)
    sample = events[:20]
    assert [loop.match(e) for e in sample] == [m.match(e) for e in sample]
    assert [ref.match(e) for e in sample] == [m.match(e) for e in sample]
    # bench/matcher.py's oracle against its baseline, same events, alternating: the
    # reference matcher is written for clarity and is slower than the plain loop, so
    # ratios there use the plain loop
    loop_cpu: list[float] = []
    ref_cpu: list[float] = []
    for _ in range(repeats):
        loop_cpu.append(timed(lambda: [loop.match(e) for e in sample])[1])
        ref_cpu.append(timed(lambda: [ref.match(e) for e in sample])[1])
    return {"profiles": 100_000, "events": len(events), "events_per_cpu_s": statistics.median(
        rates), "all_runs": rates,
        "baseline_plain_loop_events_per_cpu_s": len(sample) / statistics.median(loop_cpu),
        "reference_matcher_events_per_cpu_s": len(sample) / statistics.median(ref_cpu),
        "load": load()}


def section_broker_sub(paths: dict[str, Path], n: int, sample: int) -> dict[str, Any]:
    """A broker's SUB of ``n`` profiles in one frame (the structured form the client
    library sends; ``Limits.max_profiles`` raised to allow it), from frame to ACK, then
    the first event matched (the index is compiled then): the set-up time. Baselines on
    ``sample`` profiles, same run: one frame of ``sample`` profiles, and the same
    profiles one per frame (each table insert costs more as the table grows, so per-
    profile rates are compared at the same size)."""
    from siftbus.broker.node import BrokerNode
    from siftbus.match.ingest import load_profile_columns
    from siftbus.model import load_schema, read_events
    from siftbus.wire.frames import Message, MsgType
    from siftbus.wire.limits import Limits
    from siftbus.wire.profiles import encode_profile

    schema = load_schema(paths["schema"])
    cols = load_profile_columns(paths["profiles-100000"], schema)[0]
    wire = [encode_profile(cols.profile(i)) for i in range(min(n, len(cols)))]
    n = len(wire)
    sample = min(sample, n)
    event = next(iter(read_events(paths["events-20"], schema)))
    res: dict[str, Any] = {"profiles": n, "sample": sample, "load": load()}

    def node() -> tuple[BrokerNode, str, list[Message]]:
        b = BrokerNode("B1", schema, limits=Limits(max_profiles=max(n, 10_000)))
        sent: list[Message] = []
        b.transport_send = lambda link, msg: sent.append(msg)  # type: ignore[method-assign]
        link, _ = b.client_up("c1")
        return b, link, sent

    def one_frame(items: list[Any], bulk: bool = True) -> tuple[float, float, float]:
        """(cpu s to ACK, cpu s of the first match, wall s of both); ``bulk=False``: the
        table takes the frame's profiles one at a time (the path before the poset's bulk
        insert), the same-run baseline of the set-up time."""
        b, link, sent = node()
        table = b.routing.table
        if not bulk:
            table.subscribe_many = lambda xs: [  # type: ignore[method-assign]
                table.subscribe(p, src, lid) for p, src, lid in xs]
        _, cpu, wall = timed(lambda: b.handle(link, Message(MsgType.SUB, {
            "profiles": items, "corr": 1})))
        assert sent[-1].type is MsgType.ACK and len(sent[-1].body["ids"]) == len(items)
        _, mcpu, mwall = timed(lambda: b.routing.matcher.match(event))
        return cpu, mcpu, wall + mwall

    one_frame(wire[:20])  # kernels loaded before timing
    cpu, mcpu, wall = one_frame(wire)
    res.update(cpu_s=cpu, first_match_cpu_s=mcpu, setup_cpu_s=cpu + mcpu, wall_s=wall,
               profiles_per_cpu_s=n / (cpu + mcpu))
    bcpu, bmcpu, bwall = one_frame(wire, bulk=False)
    res.update(baseline_one_at_a_time_setup_cpu_s=bcpu + bmcpu,
               baseline_one_at_a_time_wall_s=bwall)
    scpu, smcpu, _ = one_frame(wire[:sample])
    res["baseline_one_frame_sample_profiles_per_cpu_s"] = sample / (scpu + smcpu)
    b, link, _ = node()

    def one_by_one() -> None:
        for i, item in enumerate(wire[:sample]):
            b.handle(link, Message(MsgType.SUB, {"profiles": [item], "corr": i}))
        b.routing.matcher.match(event)

    _, cpu, _ = timed(one_by_one)
    res["baseline_one_per_frame_profiles_per_cpu_s"] = sample / cpu
    return res


def ensure_store(paths: dict[str, Path], clients: int = 100) -> Path:
    """A broker store holding the 100,000 standard profiles, dealt round-robin to
    ``clients`` clients (made once, kept beside the other inputs)."""
    from siftbus.broker.store import ProfileStore
    from siftbus.match.ingest import load_profile_columns
    from siftbus.model import load_schema

    path = paths["schema"].with_name(f"store-100000-{clients}.db")
    if not path.exists():
        tmp = path.with_suffix(".part")
        for old in tmp.parent.glob(tmp.name + "*"):
            old.unlink()
        cols = load_profile_columns(paths["profiles-100000"], load_schema(paths["schema"]))
        st = ProfileStore(tmp)
        st.begin()
        for i, p in enumerate(cols[0].profiles()):
            st.insert(f"c{i % clients}", p)
        st.commit()
        st.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        st.close()
        tmp.replace(path)
    return path


def _previous_restart_path() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The restart path before the bulk one: ``ProfileStore.load`` parsing each row with
    the grammar (``fast=False``), ``ClientProfiles.restore`` subscribing one profile at
    a time, as it was."""
    from siftbus.broker.store import ProfileStore

    real = ProfileStore.load  # (the bench swaps ProfileStore.load while it runs)

    def load(self: Any, schema: Any) -> list[tuple[str, Any]]:
        return real(self, schema, fast=False)

    def restore(self: Any, store: Any) -> None:
        for client, p in store.load(self.host.schema):
            cut = self.host.access.restored_pieces(client, p)
            if cut is not None:
                self.subscribe_all(client, [p], persist=False, pieces=[cut])

    return load, restore


def section_restart(paths: dict[str, Path], repeats: int) -> dict[str, Any]:
    """A broker's start-up on a store of 100,000 profiles (``ensure_store``), to its first
    matched event; the current path and the previous one (``_previous_restart_path``)
    alternating, ``repeats`` times each, in this process."""
    from siftbus.broker.client_profiles import ClientProfiles
    from siftbus.broker.node import BrokerNode
    from siftbus.broker.store import ProfileStore
    from siftbus.model import load_schema, read_events

    schema = load_schema(paths["schema"])
    store = ensure_store(paths)
    event = next(iter(read_events(paths["events-20"], schema)))
    paths_now = (ProfileStore.load, ClientProfiles.restore)
    paths_before = _previous_restart_path()
    spent = [0.0]

    def timed_load(real: Callable[..., Any]) -> Callable[..., Any]:
        def load(self: Any, schema: Any) -> Any:
            out, cpu, _ = timed(lambda: real(self, schema))
            spent[0] += cpu
            return out
        return load

    collecting = [0.0, 0.0]  # CPU s in the cyclic collector; when the running one began

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    def start(which: tuple[Callable[..., Any], Callable[..., Any]]
              ) -> tuple[dict[str, float], Any]:
        ProfileStore.load = timed_load(which[0])  # type: ignore[method-assign]
        ClientProfiles.restore = which[1]  # type: ignore[method-assign]
        spent[0] = 0.0
        gc.collect()
        collecting[0] = 0.0
        gc.callbacks.append(on_gc)
        try:
            b, cpu, wall = timed(lambda: BrokerNode("B1", schema, store=ProfileStore(store)))
            got, mcpu, mwall = timed(lambda: b.routing.matcher.match(event))
            # one full collection: what the start put off is counted, on both paths
            _, scpu, swall = timed(gc.collect)
        finally:
            gc.callbacks.remove(on_gc)
            ProfileStore.load, ClientProfiles.restore = paths_now  # type: ignore[method-assign]
        n = len(b.routing.table.entries)
        table = hashlib.blake2b(repr(sorted(  # a digest: no run keeps the table alive
            (g, e.src, e.local_id, e.profile) for g, e in
            b.routing.table.entries.items())).encode()).hexdigest()
        b.store.close()
        return {"cpu_s": cpu + mcpu + scpu, "wall_s": wall + mwall + swall,
                "parse_cpu_s": spent[0], "resubscribe_cpu_s": cpu - spent[0],
                "first_match_cpu_s": mcpu, "settle_cpu_s": scpu,
                "collector_cpu_s": collecting[0], "profiles": n}, (table, sorted(got))

    start(paths_now)  # kernels and scanners loaded before timing
    runs: dict[str, list[dict[str, float]]] = {"now": [], "before": []}
    seen: dict[str, Any] = {}
    for _ in range(repeats):
        for name, which in (("before", paths_before), ("now", paths_now)):
            r, state = start(which)
            runs[name].append(r)
            seen[name] = state
            del state
    assert seen["now"] == seen["before"], "the two restart paths built other tables"
    del seen
    out: dict[str, Any] = {"repeats": repeats, "load": load(), "clients": 100}
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        med["profiles_per_cpu_s"] = med["profiles"] / med["cpu_s"]
        med["parse_profiles_per_cpu_s"] = med["profiles"] / med["parse_cpu_s"]
        out[name] = med
        out[f"{name}_all_cpu_s"] = [r["cpu_s"] for r in rs]
    return out


def section_spark_parse(paths: dict[str, Path], n_events: int) -> dict[str, Any]:
    """The Spark pipeline's parse stage (``parse_text_batch``, what ``mapInArrow`` runs
    per Arrow batch; no JVM) on 100,000 lines of the event file. Baseline, same run: the
    same stage with the scanner switched off (``parse_event`` per line)."""
    import pyarrow as pa

    import siftbus.spark.parse as stage
    from siftbus.model import load_schema

    schema = load_schema(paths["schema"])
    st = schema.to_toml()
    with paths[f"events-{n_events}"].open() as f:
        texts = [line.rstrip("\n") for _, line in zip(range(100_000), f, strict=False)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["events"] * len(texts)), pa.array(range(1, len(texts) + 1), pa.int64()),
         pa.array(texts)], names=["source", "line", "text"])
    stage.parse_text_batch(batch.slice(0, 100), st)
    scanner = stage.scan_text_columns
    rates: dict[str, list[float]] = {"fast": [], "spec": []}
    try:
        for _ in range(3):
            for mode in rates:
                stage.scan_text_columns = scanner if mode == "fast" else \
                    (lambda *_, **__: None)  # type: ignore[assignment]
                out, cpu, _ = timed(lambda: stage.parse_text_batch(batch, st))
                assert out.num_rows == len(texts) and out.column("error").null_count == len(
                    texts)
                rates[mode].append(len(texts) / cpu)
    finally:
        stage.scan_text_columns = scanner
    return {"events": len(texts), "events_per_cpu_s": statistics.median(rates["fast"]),
            "baseline_parse_event_events_per_cpu_s": statistics.median(rates["spec"]),
            "load": load()}


def section_spark_profiles(paths: dict[str, Path], sample: int) -> dict[str, Any]:
    """A Spark job's profile file loaded (strict) as ``SubscriptionSet`` reads it
    (``ProfileFile.load``: the scanners, profiles made from columns), ``sample`` standard
    profiles. Baseline, same run: ``load_profiles`` (the lark grammar, line by line)."""
    from siftbus.lang.profile import load_profiles
    from siftbus.model import load_schema
    from siftbus.spark.subscriptions import ProfileFile

    schema = load_schema(paths["schema"])
    lines = paths["profiles-100000"].read_text().splitlines()[:sample]
    path = paths["schema"].with_name(f"spark-profiles-{len(lines)}.txt")
    path.write_text("\n".join(lines) + "\n")
    ProfileFile(paths["profiles-20"]).load(schema)
    fast: list[float] = []
    spec: list[float] = []
    for _ in range(3):
        got, cpu, _ = timed(lambda: ProfileFile(path).load(schema))
        fast.append(len(lines) / cpu)
        want, cpu, _ = timed(lambda: load_profiles(path, schema))
        spec.append(len(lines) / cpu)
    assert sorted(got, key=lambda p: p.id) == sorted(want, key=lambda p: p.id)
    return {"profiles": len(lines), "profiles_per_cpu_s": statistics.median(fast),
            "baseline_load_profiles_per_cpu_s": statistics.median(spec), "load": load()}


SECTIONS = ("profiles", "events", "end_to_end", "parquet", "startup", "per_event", "broker_sub",
            "restart", "spark_parse", "spark_profiles")


def run_section(name: str, args: argparse.Namespace) -> dict[str, Any]:
    from siftbus.match import kernel

    kernel.use(os.environ.get(kernel.ENV) or "numba")
    paths = ensure_data(args.data, args.profiles, args.events)
    if name == "profiles":
        return section_profiles(paths, args.profiles, args.sample)
    if name == "events":
        return section_events(paths, args.events)
    if name == "end_to_end":
        return section_end_to_end(paths, args.events, args.sample, args.data)
    if name == "parquet":
        return section_parquet(paths, args.events, args.repeats, args.data)
    if name == "startup":
        return section_startup(paths, args.repeats)
    if name == "broker_sub":
        return section_broker_sub(paths, min(args.profiles, 100_000), args.sample)
    if name == "restart":
        return section_restart(paths, args.repeats)
    if name == "spark_parse":
        return section_spark_parse(paths, args.events)
    if name == "spark_profiles":
        return section_spark_profiles(paths, args.sample)
    return section_per_event(paths, args.events, args.repeats)


def table(r: dict[str, Any]) -> str:
    rows = ["| target (issue 15) | measured | same-run baseline | goal | load |",
            "|---|---:|---:|---:|---:|"]
    if "profiles" in r:
        p = r["profiles"]
        rows.append(f"| 1. profiles: parse+validate+normalise+add, {p['profiles']:,} profiles | "
                    f"{p['profiles_per_cpu_s']:,.0f} profiles/CPU-s ({p['cpu_s']:.1f} CPU-s, "
                    f"{p['wall_s']:.1f} s wall) | lark per line + add: "
                    f"{p['baseline_per_line_profiles_per_cpu_s']:,.0f} profiles/CPU-s | "
                    f">= 200,000 | {p['load']:.1f} |")
        rows.append(f"| 1. memory per profile kept, {p['profiles']:,} profiles | "
                    f"{p['bytes_per_profile']:,.0f} B (RSS {p['rss_mb']:,.0f} MB, peak "
                    f"{p['peak_rss_mb']:,.0f} MB) | Profile object: "
                    f"{p['baseline_profile_object_bytes']:,.0f} B (reference matcher RSS "
                    f"growth {p['baseline_reference_matcher_growth_bytes']:,.0f} B) | <= 300 B, "
                    f"<= 600 MB | {p['load']:.1f} |")
    if "events" in r:
        e = r["events"]
        rows.append(f"| 2. events: JSON lines -> validated key columns, {e['events']:,} events | "
                    f"{e['events_per_cpu_s']:,.0f} ev/CPU-s ({e['cpu_s']:.1f} CPU-s) | "
                    f"json.loads per line: {e['baseline_json_loads_events_per_cpu_s']:,.0f} "
                    f"ev/CPU-s | >= 1,000,000 | {e['load']:.1f} |")
    if "end_to_end" in r:
        x = r["end_to_end"]
        for fmt in ("json", "parquet"):
            f = x[fmt]
            rows.append(f"| 3. siftbus match 100,000 x {x['events']:,}, {fmt} out | "
                        f"{f['events_per_cpu_s']:,.0f} ev/CPU-s ({f['cpu_s']:.1f} CPU-s, "
                        f"{f['wall_s']:.1f} s wall, peak {f['peak_rss_mb']:,.0f} MB) | "
                        f"per event: {x['baseline_per_event_events_per_cpu_s']:,.0f} ev/CPU-s;"
                        f" kernel alone: {x['kernel_only_events_per_cpu_s']:,.0f} | "
                        f">= 200,000 | {f['load']:.1f} |")
    if "parquet" in r:
        w = r["parquet"]
        base = w["codecs"]["previous (list<string>, snappy)"]
        for codec in ("snappy", "none", "zstd"):
            c = w["codecs"][codec]
            rows.append(f"| 3. Parquet writer alone, {w['events']:,} events, {codec} | "
                        f"{c['cpu_s']:.3f} CPU-s, {c['bytes'] / 1e6:.1f} MB | previous "
                        f"writer: {base['cpu_s']:.3f} CPU-s, {base['bytes'] / 1e6:.1f} MB | "
                        f"measured | {w['load']:.1f} |")
    if "startup" in r:
        s = r["startup"]
        rows.append(f"| 3. start-up: siftbus match, tiny input (median of {s['repeats']}) | "
                    f"{s['match_wall_s']:.2f} s wall, {s['match_cpu_s']:.2f} CPU-s | "
                    f"siftbus --version {s['version_wall_s']:.2f} s / {s['version_cpu_s']:.2f}"
                    f" CPU-s; python -c pass {s['python_wall_s']:.2f} s | <= 0.4 s | "
                    f"{s['load']:.1f} |")
    if "per_event" in r:
        q = r["per_event"]
        rows.append(f"| 4. per-event match(), 100,000 profiles | {q['events_per_cpu_s']:,.0f} "
                    f"ev/CPU-s | plain loop: {q['baseline_plain_loop_events_per_cpu_s']:,.0f} "
                    f"ev/CPU-s | >= 150,000 | {q['load']:.1f} |")
        if "reference_matcher_events_per_cpu_s" in q:
            ref, loop = q["reference_matcher_events_per_cpu_s"], \
                q["baseline_plain_loop_events_per_cpu_s"]
            rows.append(f"| 6. bench/matcher.py's reference matcher (the oracle), same 20 "
                        f"events | {ref:,.1f} ev/CPU-s: "
                        f"{'slower' if ref < loop else 'not slower'} than the plain loop "
                        f"(x{ref / loop:.2f}) | plain loop: {loop:,.1f} ev/CPU-s | ratios "
                        f"use the plain loop | {q['load']:.1f} |")
    if "broker_sub" in r:
        b = r["broker_sub"]
        rows.append(f"| 5. broker SUB of {b['profiles']:,} profiles in one frame, to ACK and "
                    f"first match | {b['setup_cpu_s']:.1f} CPU-s set-up ({b['cpu_s']:.1f} to "
                    f"ACK + {b['first_match_cpu_s']:.2f} first match; {b['wall_s']:.1f} s "
                    f"wall; {b['profiles_per_cpu_s']:,.0f} profiles/CPU-s) | same frame, "
                    f"table filled one profile at a time: "
                    f"{b['baseline_one_at_a_time_setup_cpu_s']:.1f} CPU-s; "
                    f"{b['sample']:,} profiles: one frame "
                    f"{b['baseline_one_frame_sample_profiles_per_cpu_s']:,.0f}, one per "
                    f"frame {b['baseline_one_per_frame_profiles_per_cpu_s']:,.0f} profiles/"
                    f"CPU-s | reported | {b['load']:.1f} |")
    if "restart" in r:
        k = r["restart"]
        now, old = k["now"], k["before"]
        rows.append(f"| 5. broker restart on a store of {now['profiles']:,} profiles "
                    f"({k['clients']} clients), to first match (median of {k['repeats']}) | "
                    f"{now['cpu_s']:.1f} CPU-s ({now['profiles_per_cpu_s']:,.0f} profiles/"
                    f"CPU-s): store read {now['parse_cpu_s']:.2f} "
                    f"({now['parse_profiles_per_cpu_s']:,.0f}/CPU-s) + re-subscribe "
                    f"{now['resubscribe_cpu_s']:.1f} + first match "
                    f"{now['first_match_cpu_s']:.2f} + a full collection "
                    f"{now['settle_cpu_s']:.2f}; the collector in all "
                    f"{now['collector_cpu_s']:.1f} | previous path: {old['cpu_s']:.1f} "
                    f"CPU-s ({old['profiles_per_cpu_s']:,.0f}/CPU-s): grammar per row "
                    f"{old['parse_cpu_s']:.1f} ({old['parse_profiles_per_cpu_s']:,.0f}/CPU-s)"
                    f" + one at a time {old['resubscribe_cpu_s']:.1f} + first match "
                    f"{old['first_match_cpu_s']:.2f} + a full collection "
                    f"{old['settle_cpu_s']:.2f}; the collector in all "
                    f"{old['collector_cpu_s']:.1f} | fast path | {k['load']:.1f} |")
    if "spark_parse" in r:
        k = r["spark_parse"]
        rows.append(f"| 5. Spark parse stage (parse_text_batch), {k['events']:,} lines | "
                    f"{k['events_per_cpu_s']:,.0f} ev/CPU-s | parse_event per line: "
                    f"{k['baseline_parse_event_events_per_cpu_s']:,.0f} ev/CPU-s | fast path |"
                    f" {k['load']:.1f} |")
    if "spark_profiles" in r:
        k = r["spark_profiles"]
        rows.append(f"| 5. Spark profile file (strict load), {k['profiles']:,} profiles | "
                    f"{k['profiles_per_cpu_s']:,.0f} profiles/CPU-s | load_profiles (lark): "
                    f"{k['baseline_load_profiles_per_cpu_s']:,.0f} profiles/CPU-s | fast path "
                    f"| {k['load']:.1f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description="siftbus ingest benchmark (issue 15 targets)")
    ap.add_argument("--quick", action="store_true", help="200k profiles and events")
    ap.add_argument("--profiles", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=20_000,
                    help="lines of the slow per-line baselines")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sections", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    ap.add_argument("--data", type=Path, default=Path(os.environ.get(
        "TMPDIR", "/tmp")) / "siftbus-bench-ingest", help="where the input files are kept")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ingest.json")
    ap.add_argument("--one", choices=SECTIONS, help=argparse.SUPPRESS)
    ap.add_argument("--make-profiles", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--make-events", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make_profiles:
        make_profiles(args.make_profiles, args.to)
        return
    if args.make_events:
        make_events(args.make_events, args.to)
        return
    if args.quick:
        args.profiles = min(args.profiles, 200_000)
        args.events = min(args.events, 200_000)
        args.sample = min(args.sample, 5_000)
    if args.one:
        print(json.dumps(run_section(args.one, args)))
        return
    ensure_data(args.data, args.profiles, args.events)
    results: dict[str, Any] = {}
    for name in args.sections:
        cmd = [sys.executable, __file__, "--one", name, "--profiles", str(args.profiles),
               "--events", str(args.events), "--sample", str(args.sample), "--repeats",
               str(args.repeats), "--data", str(args.data)]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    md = table(results)
    print(md)
    print(f"\nrates are CPU time of the measured process; load average {load():.1f} on "
          f"{os.cpu_count()} CPUs (wall figures are noisy on a shared machine).")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "ingest", "mode": "quick" if args.quick else "full",
        "targets": TARGETS,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg": os.getloadavg(), "platform": platform.platform(),
                    "kernels": os.environ.get("SIFTBUS_KERNELS") or "numba"},
        "results": results, "table": md}, indent=2) + "\n")


if __name__ == "__main__":
    main()
