"""``siftbus match``, ``check`` and ``explain`` end to end, as a user runs them."""

import json
import subprocess
from pathlib import Path

import pytest

import forked_cli

ROOT = Path(__file__).resolve().parents[2]
BUILDING = ROOT / "examples" / "building"


def siftbus(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own (forked: :mod:`forked_cli`)."""
    return forked_cli.run(list(args), cwd=cwd, timeout=120)


def building_args(events: Path = BUILDING / "events.jsonl") -> list[str]:
    return ["--schema", str(BUILDING / "schema.toml"), "--profiles",
            str(BUILDING / "profiles.txt"), "--events", str(events)]


@pytest.mark.parametrize("engine", ["reference", "counting", "index", None])
def test_match_on_the_building_example_gives_the_checked_in_matches(engine: str | None) -> None:
    args = ["match", *building_args()] + (["--engine", engine] if engine else [])
    r = siftbus(*args)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (BUILDING / "expected-matches.jsonl").read_text()


def test_expected_matches_say_what_the_building_means() -> None:
    lines = [json.loads(x) for x in (BUILDING / "expected-matches.jsonl").read_text().splitlines()]
    m = {x["event"]: x["matches"] for x in lines}
    assert len(m) == 34
    assert m[0] == []  # 20.0 is not > 20
    assert "heater-legacy-1" in m[1] and "heater-r1" in m[1]  # 20.1 is
    assert m[2] == ["heater-frost"]  # 1.95 rounds to 2.0 <= 2.0
    assert m[8] == []  # 27.94 rounds to 27.9, below 28.0
    assert m[9] == [] and m[10] == ["hvac-cold"]  # room != 1
    assert m[23] == ["janitor-failed", "janitor-floor1", "janitor-worn"]  # FAILED >= DEGRADED
    assert m[24] == ["security-glass-north"]  # zone prefix "north", level >= 3
    assert m[26] == []  # northwest has the prefix, but level 2 < 3
    assert m[31] == ["hvac-all", "hvac-r31"]


def test_match_writes_out_file_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    r = siftbus("match", *building_args(), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == (BUILDING / "expected-matches.jsonl").read_text()
    assert "matched 34 events" in r.stderr


def test_match_stops_at_a_bad_event_with_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "e.jsonl"
    good = (BUILDING / "events.jsonl").read_text().splitlines()
    bad.write_text("\n".join([*good[:3], '{"type": "Sun", "facade": "X", "irradiance": 1}',
                              *good[3:]]) + "\n")
    out = tmp_path / "m.jsonl"
    r = siftbus("match", *building_args(bad), "--out", str(out))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"siftbus: error: {bad}, line 4, column 17: Sun.facade: 'X' is not one of enum[N,E,S,W]"]
    assert not out.exists()  # no half-written output is left behind


def test_match_reports_bad_profile_file(tmp_path: Path) -> None:
    prof = tmp_path / "p.txt"
    prof.write_text("a: Sun(facade = S)\nb: Sun(irradiance > 1300)\n")
    r = siftbus("match", "--schema", str(BUILDING / "schema.toml"), "--profiles", str(prof),
                "--events", str(BUILDING / "events.jsonl"))
    assert r.returncode == 2
    assert f"{prof}, line 2, column 8: irradiance: 1300 is outside" in r.stderr


def test_match_reports_bad_schema_and_missing_files(tmp_path: Path) -> None:
    schema = tmp_path / "s.toml"
    schema.write_text('[T]\na = "int[0,1"\n')
    r = siftbus("match", "--schema", str(schema), "--profiles", "x", "--events", "y")
    assert r.returncode == 2 and f"{schema}, line 2, column 1: T.a: unknown type" in r.stderr
    r = siftbus("match", *building_args(tmp_path / "none.jsonl"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_check_reports_every_error(tmp_path: Path) -> None:
    prof = tmp_path / "p.txt"
    prof.write_text("a: Sun(facade = S)\nb: Sun(facade = Q)\nc Sun()\na: Sun()\n")
    ev = tmp_path / "e.jsonl"
    ev.write_text('{"type": "Sun", "facade": "N"}\n{"type": "Sun", "facade": "N", '
                  '"irradiance": 5}\nnot json\n')
    r = siftbus("check", "--schema", str(BUILDING / "schema.toml"), "--profiles", str(prof),
                "--events", str(ev))
    assert r.returncode == 2  # bad input, as for every command
    errors = r.stderr.splitlines()
    assert len(errors) == 5 and all(x.startswith("siftbus: error: ") for x in errors), r.stderr
    assert f"{prof}, line 2, column 8" in errors[0]
    assert f"{prof}, line 3, column 3" in errors[1]
    assert "already used on line 1" in errors[2]
    assert f"{ev}, line 1, column 1: Sun event lacks attribute(s) irradiance" in errors[3]
    assert f"{ev}, line 3, column 1: invalid JSON" in errors[4]
    assert "1 profiles valid, 3 errors" in r.stdout and "1 events valid, 2 errors" in r.stdout


def test_check_accepts_the_example() -> None:
    r = siftbus("check", *building_args())
    assert r.returncode == 0, r.stderr
    assert "537 profiles" in r.stdout and "34 events" in r.stdout


def test_explain_shows_each_condition() -> None:
    r = siftbus("explain", "--schema", str(BUILDING / "schema.toml"), "--profile",
                "Temperature(value < 16, room != 1)", "--event",
                '{"type": "Temperature", "sensor": 13, "room": 1, "value": 15.9}', "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["matches"] is False
    assert [(c["condition"], c["event_value"], c["holds"]) for c in out["conditions"]] == [
        ("value < 16.0", "15.9", True), ("room != 1", "1", False)]
    assert out["summary"] == "NO MATCH: 1 of 2 condition(s) fail: room != 1"
    r = siftbus("explain", "--schema", str(BUILDING / "schema.toml"), "--profile",
                "p: Temperature(value < 16)", "--event",
                '{"type": "Temperature", "sensor": 13, "room": 1, "value": 15.9}')
    assert r.returncode == 0 and "MATCH: the event meets all 1 condition(s)" in r.stdout


def test_explain_wrong_type_and_bad_inputs() -> None:
    r = siftbus("explain", "--schema", str(BUILDING / "schema.toml"), "--profile",
                "Sun(irradiance > 5)", "--event", '{"type": "OutdoorTemp", "sensor": 1, '
                '"value": 3}')
    assert r.returncode == 1 and "profile is for Sun events, the event is a OutdoorTemp" in r.stdout
    r = siftbus("explain", "--schema", str(BUILDING / "schema.toml"), "--profile",
                "Sun(irradiance >> 5)", "--event", '{"type": "Sun", "facade": "N", '
                '"irradiance": 3}')
    assert r.returncode == 2
    assert "siftbus: error: --profile, line 1, column 17: unexpected" in r.stderr


def test_match_files_with_progress_bar_streams_in_batches(tmp_path: Path) -> None:
    import io

    from siftbus.cli import match as match_cli
    from siftbus.model import load_schema

    events = tmp_path / "e.jsonl"
    lines = (BUILDING / "events.jsonl").read_text().splitlines()
    events.write_text("\n".join(lines * 300) + "\n")  # more than one batch of 4096
    out = io.StringIO()
    n, m = match_cli.match_files(load_schema(BUILDING / "schema.toml"),
                                 BUILDING / "profiles.txt", events, out, engine="reference",
                                 progress=True)
    expected = [json.loads(x)["matches"]
                for x in (BUILDING / "expected-matches.jsonl").read_text().splitlines()]
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert n == len(got) == 34 * 300
    assert [g["event"] for g in got] == list(range(n))
    assert [g["matches"] for g in got] == expected * 300
    assert m == sum(len(x) for x in expected) * 300


def test_version_and_literal_brackets_in_help() -> None:
    from importlib.metadata import version

    import siftbus as pkg

    assert pkg.__version__ == version("siftbus")  # one version: pyproject's
    out = siftbus("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"siftbus {pkg.__version__}"
    # help texts quote TOML tables and JSON: brackets must survive (no markup parsing)
    assert '"matches": [ids...]' in " ".join(siftbus("match", "--help").stdout.split())
    assert "[spark] table" in " ".join(siftbus("pipeline", "run", "--help").stdout.split())


@pytest.mark.parametrize(("bom", "end"), [(b"", b"\r"), (b"\xef\xbb\xbf", b"\n"),
                                          (b"\xef\xbb\xbf", b"\r\n"), (b"\xef\xbb\xbf", b"\r")])
def test_check_and_match_read_files_by_one_rule(tmp_path: Path, bom: bytes, end: bytes) -> None:
    # check accepted CR-only line ends and match refused them; both refused a BOM, which
    # the pipeline (Spark's text reader) skips: now one rule everywhere.
    events = tmp_path / "e.jsonl"
    events.write_bytes(bom + (BUILDING / "events.jsonl").read_bytes().replace(b"\n", end))
    profiles = tmp_path / "p.txt"
    profiles.write_bytes(bom + (BUILDING / "profiles.txt").read_bytes().replace(b"\n", end))
    r = siftbus("check", "--schema", str(BUILDING / "schema.toml"), "--profiles",
                str(profiles), "--events", str(events))
    assert r.returncode == 0, r.stderr
    assert "537 profiles" in r.stdout and "34 events" in r.stdout
    r = siftbus("match", "--schema", str(BUILDING / "schema.toml"), "--profiles",
                str(profiles), "--events", str(events))
    assert r.returncode == 0, r.stderr
    assert r.stdout == (BUILDING / "expected-matches.jsonl").read_text()
