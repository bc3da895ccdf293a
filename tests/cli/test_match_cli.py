"""``siftbus match``'s fast path: bulk loading, columnar batches, JSON/Arrow/Parquet output,
every engine giving the same rows, and a start that loads no numba for tiny inputs."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from siftbus.cli import _match_writers, _matchfiles
from siftbus.cli import match as match_cli
from siftbus.match import kernel
from siftbus.model import load_schema

ROOT = Path(__file__).resolve().parents[2]
BUILDING = ROOT / "examples" / "building"
EXPECTED = [json.loads(x)["matches"]
            for x in (BUILDING / "expected-matches.jsonl").read_text().splitlines()]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema",
                           str(BUILDING / "schema.toml"), "--profiles",
                           str(BUILDING / "profiles.txt"), "--events",
                           str(BUILDING / "events.jsonl"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("engine", ["index", "counting", "reference"])
def test_every_engine_writes_the_checked_in_rows_over_many_batches(
        engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches of mixed event types: the per-type CSRs are put back in event
    order; engines with snapshots and without give the same bytes."""
    monkeypatch.setattr(_matchfiles, "CHUNK_BYTES", 300)
    events = tmp_path / "e.jsonl"
    lines = (BUILDING / "events.jsonl").read_text().splitlines()
    events.write_text("\n".join(lines * 5) + "\n")
    out = io.StringIO()
    n, m = match_cli.match_files(load_schema(BUILDING / "schema.toml"),
                                 BUILDING / "profiles.txt", events, out, engine=engine)
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert n == len(got) == 34 * 5
    assert [g["event"] for g in got] == list(range(n))
    assert [g["matches"] for g in got] == EXPECTED * 5
    assert m == sum(map(len, EXPECTED)) * 5
    reference = (BUILDING / "expected-matches.jsonl").read_text().splitlines()
    assert out.getvalue().splitlines()[:34] == reference  # byte for byte


@pytest.mark.parametrize("suffix,fmt", [(".parquet", None), (".arrow", None),
                                        (".bin", "parquet"), (".out", "arrow")])
def test_arrow_and_parquet_output(suffix: str, fmt: str | None, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / f"m{suffix}"
    r = run("--out", str(out), *(["--format", fmt] if fmt else []))
    assert r.returncode == 0, r.stderr
    assert "matched 34 events" in r.stderr
    kind = fmt or ("parquet" if suffix == ".parquet" else "arrow")
    table = pq.read_table(out) if kind == "parquet" else pa.ipc.open_file(out).read_all()
    assert table.schema.names == ["event", "matches"]
    assert table.column("event").to_pylist() == list(range(34))
    assert table.column("matches").to_pylist() == EXPECTED
    assert not out.with_name(out.name + ".part").exists()


@pytest.fixture(params=["python", "numba"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both kernel sets: with numba the compiled scanners cut the event file in
    ``CHUNK_BYTES`` chunks, with Python the specification's reader does."""
    kernel.use(request.param)
    try:
        yield request.param
    finally:
        kernel.use()


@pytest.mark.parametrize("engine", ["index", "counting", "reference"])
def test_parquet_reads_back_as_the_json_rows(engine: str, kernels: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The dictionary-typed Parquet output, over many batches and row groups, reads back
    as ``list<string>`` with exactly the rows of the JSON output (and of the checked-in
    reference rows); snapshot engines (CSR path) and the others (rows path) alike."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    monkeypatch.setattr(_matchfiles, "CHUNK_BYTES", 300)
    monkeypatch.setattr(_match_writers, "ROW_GROUP_EVENTS", 7)
    monkeypatch.setattr(_match_writers, "ROW_GROUP_MATCHES", 11)
    schema = load_schema(BUILDING / "schema.toml")
    events = tmp_path / "e.jsonl"
    lines = (BUILDING / "events.jsonl").read_text().splitlines()
    events.write_text("\n".join(lines * 5) + "\n")
    text = io.StringIO()
    n_json, m_json = match_cli.match_files(schema, BUILDING / "profiles.txt", events, text,
                                           engine="reference")
    out = tmp_path / "m.parquet"
    n, m = match_cli.match_files(schema, BUILDING / "profiles.txt", events, out,
                                 engine=engine, fmt="parquet")
    assert (n, m) == (n_json, m_json) == (34 * 5, sum(map(len, EXPECTED)) * 5)
    f = pq.ParquetFile(out)
    assert f.schema_arrow == pa.schema([("event", pa.int64()),
                                        ("matches", pa.list_(pa.field("element", pa.string())))])
    # numba: 300-byte chunks, a row group per 7 events or 11 matches; python: one chunk
    # of 170 events (the specification's reader), a row group per snapshot engine's
    # chunk, and per batch of the rows path (a dictionary each)
    assert f.metadata.num_row_groups > (5 if kernels == "numba" else 0)
    rows = f.read().to_pylist()
    assert rows == [json.loads(x) for x in text.getvalue().splitlines()]
    assert [r["matches"] for r in rows] == EXPECTED * 5


def test_parquet_of_no_events_has_the_columns(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    events = tmp_path / "e.jsonl"
    events.write_text("")
    out = tmp_path / "m.parquet"
    assert match_cli.match_files(load_schema(BUILDING / "schema.toml"),
                                 BUILDING / "profiles.txt", events, out, fmt="parquet") == (0, 0)
    table = pq.read_table(out)
    assert table.schema.names == ["event", "matches"] and table.num_rows == 0


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_arrow_output_does_not_import_pandas(fmt: str, tmp_path: Path) -> None:
    """pyarrow's ``pa.array`` imports pandas (~0.2 CPU-s, as much as writing 1M events):
    the writers build their arrays from buffers instead."""
    pytest.importorskip("pyarrow")
    code = ("import sys\nfrom pathlib import Path\nfrom siftbus.cli import match\n"
            "from siftbus.match import kernel\nfrom siftbus.model import load_schema\n"
            "kernel.use('numba')\n"
            f"b = Path({str(BUILDING)!r})\n"
            "n = match.match_files(load_schema(b / 'schema.toml'), b / 'profiles.txt', "
            f"b / 'events.jsonl', Path({str(tmp_path / 'm')!r}), fmt={fmt!r})\n"
            "print(n, 'pandas' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["(34,", f"{sum(map(len, EXPECTED))})", "False"]


def test_format_errors_are_one_line() -> None:
    r = run("--format", "csv")
    assert r.returncode == 2 and "choose one of json, arrow, parquet" in r.stderr
    r = run("--format", "parquet")
    assert r.returncode == 2 and "parquet output needs --out FILE" in r.stderr


def test_tiny_input_does_not_load_numba(tmp_path: Path) -> None:
    """The default kernels stay in Python for small jobs: no numba import, no JIT."""
    code = ("import sys\nfrom siftbus.cli import main\nsys.argv = ['siftbus', 'match', "
            f"'--schema', {str(BUILDING / 'schema.toml')!r}, '--profiles', "
            f"{str(BUILDING / 'profiles.txt')!r}, '--events', "
            f"{str(BUILDING / 'events.jsonl')!r}, '--out', {str(tmp_path / 'o.jsonl')!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('numba' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", "SIFTBUS_KERNELS": "auto"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert (tmp_path / "o.jsonl").read_text() == (BUILDING / "expected-matches.jsonl").read_text()


def _cli_modules(argv: list[str]) -> tuple[list[str], list[str]]:
    """(command modules imported, commands registered) when ``siftbus.cli`` is imported
    as the ``siftbus`` command with ``argv``."""
    code = ("import sys, json\n"
            f"sys.argv = {argv!r}\n"
            "import siftbus.cli as c\n"
            "app = c.app\n"
            "mods = sorted(m for m in sys.modules if m.startswith('siftbus.cli.'))\n"
            "names = sorted([x.name for x in c.app.registered_commands]"
            " + [x.name for x in c.app.registered_groups])\n"
            "print(json.dumps([mods, names]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=True)
    mods, names = json.loads(r.stdout)
    return mods, names


def test_start_up_registers_only_the_command_asked_for() -> None:
    """``siftbus match`` imports the match command's module only (start-up); a command
    without a module of its name, and any other importer, get every command."""
    mods, names = _cli_modules(["siftbus", "match", "--help"])
    assert mods == ["siftbus.cli._common", "siftbus.cli._match_writers",
                    "siftbus.cli._matchfiles", "siftbus.cli.match"] and names == ["match"]
    mods, names = _cli_modules(["/x/bin/siftbus", "publish", "--help"])
    assert "publish" in names and "match" in names and "siftbus.cli.broker" in mods
    mods, names = _cli_modules(["pytest", "match"])
    assert "broker" in names and "match" in names


@pytest.mark.parametrize("values", [[], ["a", "bc", ""], ["é", "x", "日本", "z"]])
def test_arrow_string_arrays_from_buffers_equal_pyarrows(values: list[str]) -> None:
    pa = pytest.importorskip("pyarrow")
    import numpy as np

    for given in (values, np.array(values, dtype=str)):
        got = match_cli._string_array(pa, given)
        assert got.type == pa.string() and got.to_pylist() == values
    nums = np.arange(5, dtype=np.int64) * 3
    assert match_cli._numeric(pa, nums, "int32").to_pylist() == [0, 3, 6, 9, 12]
    assert match_cli._numeric(pa, nums).type == pa.int64()


HEAVY = ("typer", "click", "pydantic", "rich", "lark", "pyarrow", "cloudevents")


def _imported(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str],
                                                             set[str]]:
    """The run of ``python -m siftbus`` and the top-level packages it imported."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "siftbus", *args],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    names = {line.rpartition("|")[2].strip().split(".")[0]
             for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, names


@pytest.mark.parametrize("kernels", ["python", "numba"])
def test_plain_match_starts_without_typer_rich_or_lark(kernels: str, tmp_path: Path) -> None:
    """``siftbus match`` with plain options: the same rows, without importing the command
    line's libraries (typer, click, pydantic, rich), lark (the compiled scanners read the
    files), pyarrow or the CloudEvents SDK; ``--help`` and bad values still get typer's
    help and errors."""
    import os

    env = {**os.environ, "SIFTBUS_KERNELS": kernels, "PYTHONPATH": str(ROOT / "src")}
    legacy = "heater-legacy-1"  # Bittner's form: the grammar's to read
    profiles = tmp_path / "p.txt"
    profiles.write_text("".join(x for x in (BUILDING / "profiles.txt").read_text()
                                .splitlines(keepends=True) if not x.startswith(legacy)))
    want = "".join(json.dumps({"event": i, "matches": [m for m in row if m != legacy]}) + "\n"
                   for i, row in enumerate(EXPECTED))
    out = tmp_path / "o.jsonl"
    args = ["match", "--schema", str(BUILDING / "schema.toml"), "--profiles", str(profiles),
            f"--events={BUILDING / 'events.jsonl'}", "--out", str(out), "--no-cloudevents"]
    r, names = _imported(args, env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert out.read_text() == want
    heavy = set(HEAVY) - ({"lark"} if kernels == "python" else set())  # the grammar reads
    assert not names & heavy, names & heavy
    r, names = _imported([*args, "--engine", "nope"], env)
    assert r.returncode == 2 and "Invalid value for --engine" in r.stderr
    assert "typer" in names
    r, _ = _imported([*args[:-1], "--colour"], env)
    assert r.returncode == 2 and "No such option: --colour" in r.stderr


def test_a_reader_leaving_early_ends_match_quietly(tmp_path: Path) -> None:
    """``siftbus match ... | head -1``: exit 1 without a traceback (as click does for the
    typer command), also on the start-up path that runs without typer."""
    import os

    events = tmp_path / "e.jsonl"
    events.write_text((BUILDING / "events.jsonl").read_text() * 400)
    # buffered, as by default (unbuffered, a write cut short by the reader just stops)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    p = subprocess.Popen([sys.executable, "-m", "siftbus", "match", "--schema",
                          str(BUILDING / "schema.toml"), "--profiles",
                          str(BUILDING / "profiles.txt"), "--events", str(events)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert p.stdout is not None and p.stderr is not None
    assert json.loads(p.stdout.readline())["event"] == 0
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1 and "Traceback" not in err, err


def test_out_to_a_pipe_writes_into_it_and_leaves_it_a_pipe(tmp_path: Path) -> None:
    """``--out /dev/null`` (or a FIFO) is written in place: the atomic rename used for
    files replaced the device with a regular file (as root, /dev/null itself)."""
    fifo = tmp_path / "matches"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer's open returns
    try:
        proc = subprocess.Popen([sys.executable, "-m", "siftbus", "match", "--schema",
                                 str(BUILDING / "schema.toml"), "--profiles",
                                 str(BUILDING / "profiles.txt"), "--events",
                                 str(BUILDING / "events.jsonl"), "--out", str(fifo)],
                                stderr=subprocess.PIPE, cwd=ROOT)
        got = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:  # the writer is there, with nothing written yet
                chunk = None
            if chunk:
                got += chunk
            elif proc.poll() is not None and chunk == b"":
                break
            else:
                time.sleep(0.01)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not fifo.with_name("matches.part").exists()
    assert [json.loads(x)["matches"] for x in got.decode().splitlines()] == EXPECTED


def test_an_id_used_by_two_event_types_is_refused_with_its_line(tmp_path: Path) -> None:
    """The compiled load adds each type's profiles without looking their ids up among
    the types added before (the file's own check found every repeat): an id repeated
    under another type still stops the job with the specification's error and line."""
    lines = (BUILDING / "profiles.txt").read_text().splitlines()
    twice = [*lines, "heater-r4: Motion(present = 1)"]  # heater-r4 is an OutdoorTemp above
    profiles = tmp_path / "p.txt"
    profiles.write_text("\n".join(twice) + "\n")
    got = subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema",
                          str(BUILDING / "schema.toml"), "--profiles", str(profiles),
                          "--events", str(BUILDING / "events.jsonl")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "SIFTBUS_KERNELS": "numba"})
    assert got.returncode == 2
    assert got.stdout == ""
    err = got.stderr.strip()
    assert err.startswith("siftbus: error:") and "\n" not in err
    assert f"line {len(twice)}, column 1: profile id 'heater-r4' is already used on line 4" in err
