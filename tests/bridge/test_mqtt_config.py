"""The ``[mqtt]`` table: topic rules agree with paho-mqtt's own topic matcher, levels fill
attributes, payloads are checked against the rule, control messages parse, and a bad
table is refused with its line (also by the CLI, in one line with exit code 2)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.client import topic_matches_sub

from broker_strategies import SCHEMA
from siftbus.bridge import parse_control, parse_mqtt
from siftbus.bridge.mqtt_config import event_object
from siftbus.errors import ConfigError, EventError, ProfileError, SiftbusError
from siftbus.model import event_from_dict

LEVELS = st.sampled_from(["a", "b", "7", "x.y", ""])


@st.composite
def rules(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(["a", "b", "+", "{a}", "{s}"]), min_size=1,
                          max_size=4))
    if draw(st.booleans()):
        parts.append("#")
    return "/".join(parts)


@settings(max_examples=300, deadline=None)
@given(rules(), st.lists(LEVELS, min_size=1, max_size=6))
def test_a_rule_matches_a_topic_exactly_when_paho_does(topic: str, levels: list[str]) -> None:
    rule = parse_mqtt(f'[[mqtt.ingress]]\ntopic = "{topic}"\ntype = "T"\n', SCHEMA).ingress[0]
    name = "/".join(levels)
    assert (rule.attributes(name) is not None) == topic_matches_sub(rule.filter, name)


def test_levels_fill_attributes_and_must_agree_with_the_payload() -> None:
    s = parse_mqtt('[[mqtt.ingress]]\ntopic = "dev/{a}/{s}/#"\ntype = "T"\n', SCHEMA)
    rule = s.rule_for("dev/3/hall/x/y")
    assert rule is not None and rule.filter == "dev/+/+/#"
    assert event_object(rule, "dev/3/hall/x", {"b": "LO"}) == \
        {"type": "T", "a": 3, "s": "hall", "b": "LO"}
    assert event_object(rule, "dev/3/2.5", {"a": 3})["s"] == Decimal("2.5")
    with pytest.raises(EventError, match="topic says 3"):
        event_object(rule, "dev/3/x", {"a": 4})
    with pytest.raises(EventError, match="not the topic's type"):
        event_object(rule, "dev/3/x", {"type": "U"})
    with pytest.raises(EventError, match="JSON object"):
        event_object(rule, "dev/3/x", [1])
    assert s.rule_for("other/3") is None


@pytest.mark.parametrize(("text", "message"), [
    ('[[mqtt.ingress]]\ntopic = "a/{nope}"\ntype = "T"\n', "no attribute 'nope'"),
    ('[[mqtt.ingress]]\ntopic = "a/#/b"\ntype = "T"\n', "'#' only as the last level"),
    ('[[mqtt.ingress]]\ntopic = "a/b"\ntype = "Nope"\n', "not an event type"),
    ('[mqtt]\nnotify = "a/+"\n', "without wildcards"),
    ('[mqtt]\ncolour = "red"\n', "unknown key 'colour'"),
])
def test_a_bad_table_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_mqtt(text, SCHEMA, source="net.toml")
    assert info.value.line is not None


def test_control_messages() -> None:
    reg = parse_control("alice", "warm", b"T(a > 3)")
    assert reg is not None and reg.format == "json" and reg.pid.startswith("alice.warm.")
    ce = parse_control("alice", "warm", b'{"profile": "T(a > 3)", "format": "cloudevents"}')
    assert ce is not None and ce.format == "cloudevents" and ce.pid != reg.pid
    assert parse_control("alice", "warm", b"") is None  # deleted
    for sub, prof, payload in [("a b", "x", b"T()"), ("a", "x", b'{"profile": 1}'),
                               ("a", "x", b'{"profile": "T()", "format": "xml"}'),
                               ("a", "x", b"\xff")]:
        with pytest.raises(ProfileError):
            parse_control(sub, prof, payload)


def test_the_cli_refuses_a_bad_table_in_one_line(tmp_path: Path) -> None:
    schema = Path(__file__).resolve().parents[2] / "examples" / "building" / "schema.toml"
    cfg = tmp_path / "net.toml"
    cfg.write_text(f'[network]\nschema = "{schema}"\n[brokers.B1]\nport = 7999\n'
                   '[[mqtt.ingress]]\ntopic = "a/{nope}"\ntype = "Temperature"\n')
    r = subprocess.run([sys.executable, "-m", "siftbus", "mqtt-bridge", "-c", str(cfg),
                        "-n", "B1"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("siftbus: error: ")
    assert "line 6" in r.stderr and "no attribute 'nope'" in r.stderr


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                       lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c,
                                                                           max_size=3),
                       max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(st.lists(LEVELS, min_size=1, max_size=4),
       st.one_of(JSONISH, st.dictionaries(st.sampled_from(["type", "a", "b", "s", "x"]),
                                          JSONISH, max_size=5)))
def test_an_mqtt_message_is_an_event_or_a_siftbus_error(levels: list[str],
                                                        payload: object) -> None:
    """What the bridge does with any topic and JSON payload: an event, or a SiftbusError
    (counted and logged, never a crash)."""
    s = parse_mqtt('[[mqtt.ingress]]\ntopic = "d/{a}/#"\ntype = "T"\n'
                   '[[mqtt.ingress]]\ntopic = "#"\ntype = "U"\n', SCHEMA)
    topic = "/".join(["d", *levels])
    rule = s.rule_for(topic)
    assert rule is not None
    with contextlib.suppress(SiftbusError):
        event_from_dict(event_object(rule, topic, payload), SCHEMA)
