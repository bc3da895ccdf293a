"""``siftbus match`` on CloudEvents JSON lines: examples/cloudevents/events.jsonl (the
building example's events written by the cloudevents SDK) gives exactly the building
example's checked-in rows, detected by itself or with --cloudevents; a bad CloudEvent
is one located error line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDING = ROOT / "examples" / "building"
CLOUDEVENTS = ROOT / "examples" / "cloudevents" / "events.jsonl"


def run(events: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema",
                           str(BUILDING / "schema.toml"), "--profiles",
                           str(BUILDING / "profiles.txt"), "--events", str(events), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("flag", [(), ("--cloudevents",)])
def test_cloudevents_lines_match_like_the_plain_events(flag: tuple[str, ...]) -> None:
    r = run(CLOUDEVENTS, *flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (BUILDING / "expected-matches.jsonl").read_text()


def test_a_bad_cloudevent_is_one_located_line(tmp_path: Path) -> None:
    lines = CLOUDEVENTS.read_text().splitlines()
    lines[4] = lines[4].replace('"org.example.building.', '"org.example.building.X')
    bad = tmp_path / "ce.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    r = run(bad)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"siftbus: error: {bad}, line 5, column 1: CloudEvents type")


def test_plain_events_stay_plain_with_no_cloudevents() -> None:
    r = run(BUILDING / "events.jsonl", "--no-cloudevents")
    assert r.returncode == 0 and r.stdout == (BUILDING / "expected-matches.jsonl").read_text()
