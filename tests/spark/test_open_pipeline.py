"""``siftbus pipeline run`` on an extended schema (issue 31): nested, array, optional and
open-kind attributes (keys beyond int64 included) beside a plain type, profiles with the
new operators and ``or``: its matches are exactly ``siftbus match``'s (one small job)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .jobs import siftbus_exe

pytestmark = pytest.mark.spark

SCHEMA = """\
[Plain]
n = "int[0,9]"
[Order]
id = "int"
price = "float"
paid = "optional bool"
at = "optional timestamp"
client = "optional ip"
tags = "optional array<string>"
[Order.customer]
tier = "enum[BRONZE,SILVER,GOLD]"
name = "optional string"
"""
PROFILES = """\
big: Order(price >= 100.5)
gold@shop: Order(customer.tier = GOLD)
unpaid: Order(paid not exists or paid = false)
v6: Order(client cidr "ffff::/16")
named: Order(customer.name prefix "an" ignorecase, id > -9223372036854775808)
vip: Order(tags = "vip", tags not in {"old"})
late: Order(at >= "2262-04-12T00:00:00Z")
low: Plain(n < 3)
"""
EVENTS = "".join(json.dumps(e) + "\n" for e in [
    {"type": "Order", "id": 1, "price": 100.5, "tags": ["vip"],
     "customer": {"tier": "GOLD", "name": "Anna"}},
    {"type": "Plain", "n": 1},
    {"type": "Order", "id": -9223372036854775808, "price": -0.5, "paid": True,
     "at": "1500-01-01T00:00:00Z", "client": "ffff::ffff", "tags": ["sale", "new"],
     "customer": {"tier": "BRONZE"}},
    {"type": "Order", "id": 9223372036854775807, "price": 1e300, "paid": False,
     "at": "9999-12-31T23:59:59.999999999Z", "client": "10.1.2.3", "tags": "sale",
     "customer": {"tier": "SILVER", "name": "bob"}},
    {"type": "Order", "id": 7, "price": 3.25, "tags": ["x"],
     "customer": {"tier": "GOLD", "name": "ANdy"}, "more": [1, {"a": 2}]},
    {"type": "Plain", "n": 5},
    {"type": "Order", "id": 8, "price": 1, "tags": [], "customer": {"tier": "GOLD"}},
])


def test_pipeline_run_equals_siftbus_match_on_an_extended_schema(tmp_path: Path) -> None:
    for name, text in (("schema.toml", SCHEMA), ("profiles.txt", PROFILES),
                       ("events.jsonl", EVENTS)):
        (tmp_path / name).write_text(text)
    files = ["--schema", str(tmp_path / "schema.toml"), "--profiles",
             str(tmp_path / "profiles.txt"), "--events", str(tmp_path / "events.jsonl")]
    want = subprocess.run([siftbus_exe(), "match", *files], capture_output=True, text=True,
                          timeout=120)
    assert want.returncode == 0, want.stderr
    run = subprocess.run([siftbus_exe(), "pipeline", "run", *files, "--out",
                          str(tmp_path / "out"), "--master", "local[1]", "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = (tmp_path / "out" / "matches.jsonl").read_text()
    assert got == want.stdout
    assert got.count("\"matches\": []") == 1  # Plain n = 5 only
    assert (tmp_path / "out" / "dead_letters.jsonl").read_text() == ""
