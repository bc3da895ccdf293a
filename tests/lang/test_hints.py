"""The profile language helps a newcomer: ETCL/SQL spellings get a hint, unknown names a
did-you-mean, and a constant finer than its attribute's grid is named by check/explain."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from siftbus.errors import ProfileError
from siftbus.lang import parse_profile
from siftbus.lang.profile import finer_than_grid, parse_profile_text
from siftbus.model import load_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "examples" / "building" / "schema.toml"
SCHEMA = load_schema(SCHEMA_FILE)


@pytest.mark.parametrize(("line", "hint", "column"), [
    ("p: Temperature(room == 12)", "write '=' for equality", 21),
    ("p: Temperature(room = 1 and value > 2)", "separate conditions with ','", 25),
    ("p: Temperature(room = 1 AND value > 2)", "separate conditions with ','", 25),
    ("p: Temperature(room = 1 && value > 2)", "separate conditions with ','", 25),
    ("p: Temperature(room = 1 || room = 2)", "write 'or' between alternatives", 25),
    ("p: Temperatur(room = 1)", "did you mean 'Temperature'?", 4),
    ("p: temperature(room = 1)", "did you mean 'Temperature'?", 4),
    ("p: Temperature(rom = 1)", "did you mean 'room'?", 16),
])
def test_a_likely_mistake_gets_a_hint(line: str, hint: str, column: int) -> None:
    with pytest.raises(ProfileError, match=hint.replace("?", r"\?")) as info:
        parse_profile(line, SCHEMA)
    assert info.value.column in (column, column + 1)


def test_or_is_the_language_now() -> None:
    # `or` between conditions is part of the language (issue 31), no mistake to hint at
    p = parse_profile("p: Temperature(room = 1 or room = 2)", SCHEMA)
    assert p.type_name == "Temperature"


def test_no_hint_without_a_likely_meaning() -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile("p: Temperature(orientation = 1)", SCHEMA)
    assert "did you mean" not in str(info.value) and "alternative" not in str(info.value)
    with pytest.raises(ProfileError) as info:
        parse_profile("p: Xyzzy(room = 1)", SCHEMA)
    assert "did you mean" not in str(info.value)


def test_constants_finer_than_the_grid_are_found_with_their_reading() -> None:
    parsed = parse_profile_text("p: Temperature(value < 16.123, room = 3, value > 1.0)")
    found = finer_than_grid(parsed, SCHEMA["Temperature"])
    assert [(wc.column, reading) for wc, reading in found] == [(16, "value < 16.1")]
    # still accepted and rounded, as documented
    assert parse_profile("p: Temperature(value < 16.15)", SCHEMA) == \
        parse_profile("p: Temperature(value < 16.2)", SCHEMA)


def test_check_and_explain_warn_about_a_finer_constant(tmp_path: Path) -> None:
    profiles = tmp_path / "p.txt"
    profiles.write_text("a: Temperature(value < 16.1)\nb: Temperature(value < 16.123)\n")
    run = [sys.executable, "-m", "siftbus"]
    r = subprocess.run([*run, "check", "--schema", str(SCHEMA_FILE), "--profiles",
                        str(profiles)], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0
    assert r.stderr.splitlines() == [
        f"siftbus: warning: {profiles}, line 2, column 16: Temperature.value is "
        "decimal[-40,60,1], a constant here has more decimal places: the condition is read "
        "as value < 16.1"]
    r = subprocess.run([*run, "explain", "--schema", str(SCHEMA_FILE), "--profile",
                        "Temperature(value < 16.123)", "--event",
                        '{"type": "Temperature", "sensor": 1, "room": 2, "value": 16.1}'],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and "read as value < 16.1" in r.stderr  # 16.1 < 16.1 fails
