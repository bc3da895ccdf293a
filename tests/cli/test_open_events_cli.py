"""Issue 31 from the command line: matching open-kind, optional, nested and array events
with every engine; EventBridge patterns in and out; a schema proposed from samples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from siftbus.model import parse_schema, read_events

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ROOT / "examples" / "orders"


def siftbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("engine", ["index", "counting", "reference"])
def test_every_engine_writes_the_checked_in_rows(engine: str) -> None:
    r = siftbus("match", "--schema", str(ORDERS / "schema.toml"), "--profiles",
                str(ORDERS / "profiles.txt"), "--events", str(ORDERS / "events.jsonl"),
                "--engine", engine)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ORDERS / "expected-matches.jsonl").read_text()


def test_patterns_import_then_match_and_export(tmp_path: Path) -> None:
    r = siftbus("patterns", "import", str(ORDERS / "rules.jsonl"), "--schema",
                str(ORDERS / "schema.toml"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "eb-big: Order(price >= 100.0, paid = true)"
    profiles = tmp_path / "p.txt"
    profiles.write_text(r.stdout)
    m = siftbus("match", "--schema", str(ORDERS / "schema.toml"), "--profiles",
                str(profiles), "--events", str(ORDERS / "events.jsonl"))
    rows = [json.loads(x)["matches"] for x in m.stdout.splitlines()]
    assert rows == [["eb-any", "eb-big", "eb-gold"], ["eb-any"], [], ["eb-big"]]
    x = siftbus("patterns", "export", str(profiles), "--schema", str(ORDERS / "schema.toml"))
    assert x.returncode == 0, x.stderr
    assert json.loads(x.stdout.splitlines()[0]) == {
        "id": "eb-big", "pattern": {"type": ["Order"], "price": [{"numeric": [">=", 100.0]}],
                                    "paid": [True]}}


def test_schema_infer_reads_its_own_samples(tmp_path: Path) -> None:
    r = siftbus("schema", "infer", str(ORDERS / "events.jsonl"))
    assert r.returncode == 0, r.stderr
    schema = parse_schema(r.stdout)
    order = schema["Order"]
    assert order.attribute("price").spec == "float"
    assert order.attribute("at").spec == "timestamp"
    assert order.attribute("client").spec == "optional ip"
    assert order.attribute("note").spec == "optional enum[leave at door]" or \
        order.attribute("note").spec == "optional string"
    assert order.attribute("tags").array
    assert order.attribute("customer.tier").spec == "enum[BRONZE,GOLD,SILVER]"
    assert len(list(read_events(ORDERS / "events.jsonl", schema))) == 4


def test_a_refused_profile_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text('ok: Order(paid = true)\nre: Order(name matches "(a)\\\\1")\n')
    r = siftbus("match", "--schema", str(ORDERS / "schema.toml"), "--profiles", str(bad),
                "--events", str(ORDERS / "events.jsonl"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "bad.txt, line 2, column 11: regular expression" in r.stderr
