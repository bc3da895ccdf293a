"""``siftbus explain`` on an extended schema (issue 31): the summary names the
alternative that held and its conditions, and the array elements that satisfy each
condition, in the table ("held by") and in ``--json`` ("elements")."""

from __future__ import annotations

import json
from pathlib import Path

from .test_foundation import siftbus

SCHEMA = '[Order]\nid = "int"\ntags = "array<string>"\n[Order.customer]\ntier = "enum[A,B]"\n'
EVENT = '{"type": "Order", "id": 7, "tags": ["red", "blue", "rose"], "customer": {"tier": "B"}}'


def test_explain_names_the_alternative_and_the_array_elements(tmp_path: Path) -> None:
    schema = tmp_path / "s.toml"
    schema.write_text(SCHEMA)
    profile = 'Order(id = 1 or (tags prefix "r", customer.tier = B))'
    r = siftbus("explain", "--schema", str(schema), "--profile", profile, "--event", EVENT)
    assert r.returncode == 0, r.stderr
    assert "held by" in r.stdout and "tags[0], tags[2]" in r.stdout
    assert ('MATCH: alternative 2 of 2 holds: tags prefix "r" (by tags[0], tags[2]); '
            "customer.tier = B") in " ".join(r.stdout.split())
    r = siftbus("explain", "--schema", str(schema), "--profile", 'Order(tags = "green")',
                "--event", EVENT, "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["conditions"] == [{"condition": 'tags = "green"',
                                  "event_value": '["red", "blue", "rose"]', "holds": False,
                                  "elements": []}]
