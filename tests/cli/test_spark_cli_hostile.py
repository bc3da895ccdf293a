"""Bad input for ``siftbus pipeline run`` and ``pipeline stream``, through the real command.

The schema and profile files of the hostile corpus (one case per class of defect, as for
``siftbus match``), Spark config files built the same way, broker stores that are not
stores, and mistaken options: each gives exactly one ``siftbus: error:`` line naming the
file, exit 2, no traceback, bounded time and memory (``run_bad``), and all of them before
Spark starts, so that no JVM is started for a mistake and Spark's own start-up line never
joins the error. Bad event lines are no errors for the pipeline: each becomes a dead
letter with the reason ``siftbus check`` gives (test_spark_pipeline, test_spark_streaming).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile import run_bad
from hostile_inputs import (
    DEEP_TOML,
    EVENTS,
    GOOD_PROFILE,
    MATCH_PROFILE_CASES,
    MATCH_SCHEMA_CASES,
    MAX_RSS,
    PROFILE_LINES,
    PROFILES,
    SCHEMA,
    SCHEMAS,
    MiB,
    file_with_bad_line_2,
)

# Whole Spark config files (``--config``, a ``[spark]`` table).
SPARK_CONFIGS: dict[str, bytes] = {
    "arrays nested 100,000 deep": b"[spark]\n" + DEEP_TOML,
    "inline tables nested 100,000 deep": b"[spark]\nconf = " + b"{b = " * 100_000,
    "dotted key of 100,000 parts": b"[spark]\n" + b".".join([b"a"] * 100_000) + b" = 1",
    "invalid UTF-8": b'[spark]\nmaster = "\xff"\n',
    "5,000-digit shuffle partitions": b"[spark]\nshuffle_partitions = " + b"9" * 5000 + b"\n",
    "shuffle partitions 1e999": b"[spark]\nshuffle_partitions = 1e999\n",
    "20 MB file": b"[spark]\n" + b"#" * (20 * MiB) + b"\n",
    "spark is not a table": b"spark = 1\n",
    "unknown key": b"[spark]\nnope = 1\n",
}

# Arguments that are wrong whatever the files hold, and what the error line names.
RUN_OPTIONS: dict[str, tuple[list[str], str]] = {
    "missing event file": (["--events", "{tmp}/none.jsonl"], "no such event file"),
    "empty event directory": (["--events", "{tmp}/empty"], "holds no files"),
    "unknown format": (["--events", str(EVENTS), "--format", "csv"],
                       "unknown event format 'csv'"),
    "bad webhook": (["--events", str(EVENTS), "--webhook", "alice"], "--webhook wants"),
    "unknown engine": (["--events", str(EVENTS), "--engine", "fast"], "unknown engine 'fast'"),
}


def _run(tmp: Path, *, schema: Path = SCHEMA, profiles: str | Path = PROFILES,
         extra: list[str] | None = None) -> list[str]:
    return ["pipeline", "run", "--schema", str(schema), "--profiles", str(profiles),
            "--out", str(tmp / "out"), "--no-progress",
            *(extra if extra is not None else ["--events", str(EVENTS)])]


def _stream(tmp: Path, *, schema: Path = SCHEMA, profiles: str | Path = PROFILES,
            extra: list[str] | None = None) -> list[str]:
    (tmp / "in").mkdir(exist_ok=True)
    return ["pipeline", "stream", "--schema", str(schema), "--profiles", str(profiles),
            "--out", str(tmp / "out"), "--available-now",
            *(extra if extra is not None else ["--watch", str(tmp / "in")])]


COMMANDS = {"run": _run, "stream": _stream}


@pytest.mark.parametrize("name", MATCH_PROFILE_CASES)
def test_bad_profile_files(name: str, tmp_path: Path) -> None:
    f = file_with_bad_line_2(tmp_path / "profiles.txt", GOOD_PROFILE, PROFILE_LINES[name])
    run_bad(_run(tmp_path, profiles=f), where=f"{f}, line 2", max_rss=MAX_RSS)


@pytest.mark.parametrize("name", MATCH_SCHEMA_CASES)
def test_bad_schema_files(name: str, tmp_path: Path) -> None:
    f = tmp_path / "schema.toml"
    f.write_bytes(SCHEMAS[name])
    run_bad(_run(tmp_path, schema=f), where=str(f), max_rss=MAX_RSS)


@pytest.mark.parametrize("name", SPARK_CONFIGS)
def test_bad_spark_configs(name: str, tmp_path: Path) -> None:
    f = tmp_path / "spark.toml"
    f.write_bytes(SPARK_CONFIGS[name])
    run_bad([*_run(tmp_path), "--config", str(f)], where=str(f), max_rss=MAX_RSS)


@pytest.mark.parametrize("name", RUN_OPTIONS)
def test_bad_run_options(name: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    args, message = RUN_OPTIONS[name]
    line = run_bad(_run(tmp_path, extra=[a.format(tmp=tmp_path) for a in args]),
                   max_rss=MAX_RSS)
    assert message in line, line
    assert not (tmp_path / "out" / "spark.log").exists(), "Spark was started for a mistake"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("store", ["not SQLite", "no profiles table", "missing"])
def test_broker_stores_that_are_not_stores(command: str, store: str, tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "broker.db"
    if store == "not SQLite":
        db.write_bytes(b"\xff" * 4096)
    elif store == "no profiles table":
        sqlite3.connect(db).close()
    run_bad(COMMANDS[command](tmp_path, profiles=f"sqlite:{db}"), where=str(db),
            max_rss=MAX_RSS)


@pytest.mark.parametrize(("what", "args", "message"), [
    ("profiles", [], "line 2"),
    ("schema", [], "nested deeper"),
    ("config", [], "nested deeper"),
    ("watch", ["--watch", "{tmp}/none"], "watch directory"),
    ("engine", ["--watch", "{tmp}/in", "--engine", "fast"], "unknown engine 'fast'"),
    ("webhook", ["--watch", "{tmp}/in", "--webhook", "ftp://x"], "--webhook wants"),
])
def test_stream_refuses_bad_input_before_spark_starts(what: str, args: list[str],
                                                      message: str, tmp_path: Path) -> None:
    extra = [a.format(tmp=tmp_path) for a in args] or None
    kwargs: dict[str, Path] = {}
    if what == "profiles":
        kwargs["profiles"] = file_with_bad_line_2(
            tmp_path / "p.txt", GOOD_PROFILE, PROFILE_LINES["invalid UTF-8"])
    elif what == "schema":
        kwargs["schema"] = tmp_path / "s.toml"
        kwargs["schema"].write_bytes(SCHEMAS["arrays nested 100,000 deep"])
    cmd = _stream(tmp_path, extra=extra, **kwargs)  # type: ignore[arg-type]
    if what == "config":
        (tmp_path / "spark.toml").write_bytes(SPARK_CONFIGS["arrays nested 100,000 deep"])
        cmd += ["--config", str(tmp_path / "spark.toml")]
    line = run_bad(cmd, max_rss=MAX_RSS)
    assert message in line, line
    assert not (tmp_path / "out" / "spark.log").exists(), "Spark was started for a mistake"
