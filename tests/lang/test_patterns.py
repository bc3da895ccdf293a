"""EventBridge / event-ruler patterns read as profiles (issue 31, item 5).

The table holds the examples of "Content filtering in Amazon EventBridge event patterns"
(https://docs.aws.amazon.com/eventbridge/latest/userguide/content-filtering-with-event-patterns.html
, sections "Prefix matching", "Suffix matching", "Anything-but matching", "Numeric
matching", "IP address matching", "Exists matching", "Equals-ignore-case matching",
"Wildcard matching", "$or matching", arrays in "Event patterns"), each with an event that
matches and one that does not. Field names with a hyphen (``c-count``, ``x-limit``,
``detail-type``) are written with ``_``: siftbus attributes are identifiers.
"""

from __future__ import annotations

import json

import pytest

from siftbus.errors import ProfileError
from siftbus.lang.patterns import (
    format_pattern_line,
    parse_pattern,
    profile_to_pattern,
    read_pattern_lines,
)
from siftbus.lang.profile import parse_profile
from siftbus.model import event_from_dict, parse_schema

SCHEMA = parse_schema("""
[EB]
source = "optional string"
time = "optional string"
FileName = "optional string"
resources = "optional array<string>"
EventBusArn = "optional string"
detail_type = "optional string"
[EB.detail]
service = "optional string"
state = "optional string"
FileName = "optional string"
x_limit = "optional float"
c_count = "optional float"
d_count = "optional float"
sourceIPAddress = "optional ip"
""")

DOC = [  # (section, pattern, event fields, matches)
    ("prefix", {"time": [{"prefix": "2017-10-02"}]}, {"time": "2017-10-02T18:43:48Z"}, True),
    ("prefix", {"time": [{"prefix": "2017-10-02"}]}, {"time": "2017-10-03T00:00:00Z"}, False),
    ("prefix ignore case", {"detail": {"service": [{"prefix": {"equals-ignore-case": "EventB"}}]}},
     {"detail": {"service": "eventbridge"}}, True),
    ("suffix", {"FileName": [{"suffix": ".png"}]}, {"FileName": "image.png"}, True),
    ("suffix", {"FileName": [{"suffix": ".png"}]}, {"FileName": "image.PNG"}, False),
    ("suffix ignore case", {"detail": {"FileName": [{"suffix": {"equals-ignore-case": ".png"}}]}},
     {"detail": {"FileName": "image.PNG"}}, True),
    ("anything-but", {"detail": {"state": [{"anything-but": "initializing"}]}},
     {"detail": {"state": "running"}}, True),
    ("anything-but", {"detail": {"state": [{"anything-but": "initializing"}]}},
     {"detail": {"state": "initializing"}}, False),
    ("anything-but", {"detail": {"x_limit": [{"anything-but": 123}]}},
     {"detail": {"x_limit": 123}}, False),
    ("anything-but list", {"detail": {"state": [{"anything-but": ["stopped", "overloaded"]}]}},
     {"detail": {"state": "overloaded"}}, False),
    ("anything-but prefix", {"detail": {"state": [{"anything-but": {"prefix": "init"}}]}},
     {"detail": {"state": "initializing"}}, False),
    ("anything-but prefix", {"detail": {"state": [{"anything-but": {"prefix": "init"}}]}},
     {"detail": {"state": "running"}}, True),
    ("anything-but suffix", {"detail": {"FileName": [{"anything-but": {"suffix": ".txt"}}]}},
     {"detail": {"FileName": "notes.txt"}}, False),
    ("numeric", {"detail": {"c_count": [{"numeric": [">", 0, "<=", 5]}],
                            "d_count": [{"numeric": ["<", 10]}],
                            "x_limit": [{"numeric": ["=", 3.018e2]}]}},
     {"detail": {"c_count": 5, "d_count": 7, "x_limit": 301.8}}, True),
    ("numeric", {"detail": {"c_count": [{"numeric": [">", 0, "<=", 5]}]}},
     {"detail": {"c_count": 0}}, False),
    ("cidr", {"detail": {"sourceIPAddress": [{"cidr": "10.0.0.0/24"}]}},
     {"detail": {"sourceIPAddress": "10.0.0.123"}}, True),
    ("cidr", {"detail": {"sourceIPAddress": [{"cidr": "10.0.0.0/24"}]}},
     {"detail": {"sourceIPAddress": "10.0.1.1"}}, False),
    ("exists", {"detail": {"state": [{"exists": True}]}}, {"detail": {"state": "x"}}, True),
    ("exists", {"detail": {"state": [{"exists": True}]}}, {"detail": {}}, False),
    ("exists false", {"detail": {"c_count": [{"exists": False}]}}, {"detail": {}}, True),
    ("exists false", {"detail": {"c_count": [{"exists": False}]}},
     {"detail": {"c_count": 1}}, False),
    ("equals-ignore-case",
     {"detail_type": [{"equals-ignore-case": "ec2 instance state-change notification"}]},
     {"detail_type": "EC2 Instance State-change Notification"}, True),
    ("wildcard", {"EventBusArn": [{"wildcard": "arn:aws:events:us-east-1:*:event-bus/*"}]},
     {"EventBusArn": "arn:aws:events:us-east-1:123456789012:event-bus/default"}, True),
    ("wildcard", {"EventBusArn": [{"wildcard": "arn:aws:events:us-east-1:*:event-bus/*"}]},
     {"EventBusArn": "arn:aws:events:us-west-2:123456789012:event-bus/default"}, False),
    ("$or", {"detail": {"$or": [{"c_count": [{"numeric": [">", 0, "<=", 5]}]},
                                {"d_count": [{"numeric": ["<", 10]}]},
                                {"x_limit": [{"numeric": ["=", 3.018e2]}]}]}},
     {"detail": {"c_count": 9, "d_count": 3}}, True),
    ("$or", {"detail": {"$or": [{"c_count": [{"numeric": [">", 0, "<=", 5]}]},
                                {"d_count": [{"numeric": ["<", 10]}]}]}},
     {"detail": {"c_count": 9, "d_count": 30}}, False),
    ("arrays", {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]},
     {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-aaaa",
                    "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]}, True),
    ("values are or-ed", {"source": ["aws.ec2", "aws.fsx"]}, {"source": "aws.fsx"}, True),
    ("values are or-ed", {"source": ["aws.ec2", "aws.fsx"]}, {"source": "aws.s3"}, False),
]


@pytest.mark.parametrize(("section", "pattern", "fields", "expected"), DOC,
                         ids=[f"{i}-{d[0]}" for i, d in enumerate(DOC)])
def test_eventbridge_documentation_examples(section: str, pattern: dict[str, object],
                                            fields: dict[str, object], expected: bool) -> None:
    p = parse_pattern("r", pattern, SCHEMA, "EB")
    e = event_from_dict({"type": "EB", **json.loads(json.dumps(fields))}, SCHEMA)
    assert p.matches(e) is expected


@pytest.mark.parametrize("text", [
    'p: EB(source = "a")',
    'p: EB(source in {"a", "b"}, detail.state not prefix "x")',
    'p: EB(detail.c_count > 0, detail.c_count <= 5, time prefix "2017")',
    'p: EB(detail.sourceIPAddress cidr "10.0.0.0/24", FileName suffix ".png" ignorecase)',
    'p: EB(detail.state not exists, EventBusArn like "a*b")',
    'p: EB(source = "x" or detail.d_count < 10)',
    'p: EB(resources = "r1", detail.state not in {"a"})',
])
def test_profile_to_pattern_round_trip(text: str) -> None:
    p = parse_profile(text, SCHEMA)
    line = format_pattern_line(p)
    (back,) = read_pattern_lines(line, SCHEMA)
    assert back == p
    assert profile_to_pattern(back) == profile_to_pattern(p)


@pytest.mark.parametrize(("text", "why"), [
    ('p: EB(source contains "x")', "no pattern form"),
    ('p: EB(source prefix "a", source != "ab")', "no single pattern"),
])
def test_inexpressible_profiles_are_refused(text: str, why: str) -> None:
    with pytest.raises(ProfileError, match=why):
        profile_to_pattern(parse_profile(text, SCHEMA))


@pytest.mark.parametrize(("line", "why"), [
    ('{"id": "r", "pattern": {"source": ["a"]}}', "names no event type"),
    ('{"id": "r", "pattern": {"type": ["EB"], "source": [{"nope": 1}]}}', "unknown matcher"),
    ('{"id": "r", "pattern": {"type": ["EB"], "source": []}}', "non-empty list"),
    ('{"id": "r", "pattern": {"type": ["EB"], "nope": ["a"]}}', "has no attribute"),
    ('{"pattern": {}}', '"id"'),
])
def test_bad_patterns_name_their_line(line: str, why: str) -> None:
    with pytest.raises(ProfileError, match=why) as info:
        list(read_pattern_lines("\n" + line, SCHEMA, source="rules.jsonl"))
    assert info.value.line == 2
