"""Spark settings from TOML and flags, Java detection, and CLI errors before Spark starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from siftbus.errors import ConfigError, EnvironmentProblem
from siftbus.spark.session import SparkSettings, find_java, load_settings

from .jobs import SCHEMA_TOML, siftbus_exe


def test_settings_from_toml_and_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "spark.toml"
    cfg.write_text('[spark]\nmaster = "local[1]"\nshuffle_partitions = 3\n'
                   '[spark.conf]\n"spark.local.dir" = "/tmp/x"\n')
    s = load_settings(cfg)
    assert (s.master, s.shuffle_partitions, dict(s.conf)) == (
        "local[1]", 3, {"spark.local.dir": "/tmp/x"})
    s2 = s.with_overrides(master="spark://127.0.0.1:7077", shuffle_partitions=None)
    assert (s2.master, s2.shuffle_partitions) == ("spark://127.0.0.1:7077", 3)
    assert load_settings(None) == SparkSettings()
    # The JVMs start with C1 and the serial collector unless the file says otherwise.
    assert "-XX:TieredStopAtLevel=1" in s.jvm_options
    cfg.write_text('[spark]\njvm_options = ""\n')
    assert load_settings(cfg).jvm_options == ""


@pytest.mark.parametrize(("text", "message", "line"), [
    ('[spark]\nmaster = 3\n', "spark.master must be a str", None),
    ('[spark]\nshuffle_partitions = 0\n', "at least 1", None),
    ('[spark]\nnope = 1\n', "unknown key spark.nope", None),
    ("[spark]\njvm_options = \"-Dx='1'\"\n", "cannot hold a single quote", None),
    ('[spark]\nmaster = \n', "invalid TOML", 2),
])
def test_bad_config_is_a_config_error(tmp_path: Path, text: str, message: str,
                                      line: int | None) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(cfg)
    assert info.value.source == str(cfg)
    if line is not None:
        assert info.value.line == line


def test_missing_java_is_an_environment_problem(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(EnvironmentProblem, match="JAVA_HOME"):
        find_java()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="no `java` is on PATH"):
        find_java()


def test_cli_reports_bad_input_and_missing_java_in_one_line(tmp_path: Path) -> None:
    schema = tmp_path / "s.toml"
    schema.write_text(SCHEMA_TOML)
    prof = tmp_path / "p.txt"
    prof.write_text("a: Door(open = 1)\nb: Door(nope = 1)\n")
    ev = tmp_path / "e.jsonl"
    ev.write_text('{"type": "Door", "open": 1, "floor": 0}\n')
    base = [siftbus_exe(), "pipeline", "run", "--schema", str(schema), "--events", str(ev),
            "--out", str(tmp_path / "out")]
    r = subprocess.run([*base, "--profiles", str(prof)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("siftbus: error:") and "line 2" in r.stderr
    assert "nope" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    prof.write_text("a: Door(open = 1)\n")
    r = subprocess.run([*base, "--profiles", str(prof)], capture_output=True, text=True,
                       timeout=120, env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert r.returncode == 2
    assert "no `java` is on PATH" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    ([], "give either --watch DIR or --socket HOST:PORT"),
    (["--watch", ".", "--socket", "127.0.0.1:9"], "give either --watch DIR or --socket"),
    (["--socket", "127.0.0.1"], "--socket wants HOST:PORT"),
    (["--socket", "127.0.0.1:99999"], "--socket wants HOST:PORT"),
    (["--socket", "127.0.0.1:9", "--format", "xml"], "a socket carries JSON lines only"),
    (["--watch", ".", "--format", "csv"], "unknown stream format 'csv'"),
    (["--watch", ".", "--deliver-broker", "nowhere"], "--deliver-broker wants HOST:PORT"),
    # no broker there: said before Spark starts, not after a JVM start
    (["--watch", ".", "--deliver-broker", "127.0.0.1:1"], "cannot connect to broker"),
])
def test_stream_cli_rejects_bad_sources_before_spark_starts(tmp_path: Path, args: list[str],
                                                            message: str) -> None:
    schema = tmp_path / "s.toml"
    schema.write_text(SCHEMA_TOML)
    prof = tmp_path / "p.txt"
    prof.write_text("a: Door(open = 1)\n")
    r = subprocess.run([siftbus_exe(), "pipeline", "stream", "--schema", str(schema),
                        "--profiles", str(prof), "--out", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().startswith("siftbus: error:") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
