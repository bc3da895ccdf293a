"""The corpus of bad input for every parser (event JSON lines, profile lines, schema files,
network configs, JSON and profile text given as options), generated here (some inputs are
40 MB), with the good lines it is mixed into. Shared by the CLI, matcher and Spark tests;
``cli/test_hostile_parsers.py`` runs it through every command that reads it."""

from __future__ import annotations

from pathlib import Path

from hostile import ROOT

BUILDING = ROOT / "examples" / "building"
SCHEMA = BUILDING / "schema.toml"
PROFILES = BUILDING / "profiles.txt"
EVENTS = BUILDING / "events.jsonl"

MiB = 1 << 20
MAX_RSS = 600 * MiB
"""Every run stays under this, whatever its input (the largest input here is 40 MB)."""

GOOD_EVENT = b'{"type": "Sun", "facade": "N", "irradiance": 5}'
GOOD_PROFILE = b"ok: Sun(irradiance > 5)"


def sun(irradiance: bytes = b"5", facade: bytes = b'"N"') -> bytes:
    return b'{"type": "Sun", "facade": ' + facade + b', "irradiance": ' + irradiance + b"}"


# Line 2 of an event file (line 1 is good); a value of (bytes, separator) sets the line end.
EVENT_LINES: dict[str, bytes | tuple[bytes, bytes]] = {
    "json nested 100,000 deep": b"[" * 100_000,
    "objects nested 100,000 deep": b'{"a": ' * 100_000,
    "nesting inside an attribute": sun(facade=b"[" * 100_000),
    "5,000-digit integer": sun(b"9" * 5000),
    "negative 5,000-digit integer": sun(b"-" + b"9" * 5000),
    "5,000-digit integer in a list": sun(b"[" + b"1" * 5000 + b"]"),
    "NaN": sun(b"NaN"),
    "Infinity": sun(b"Infinity"),
    "-Infinity": sun(b"-Infinity"),
    "1e999999999 for an int attribute (a hang)": sun(b"1e999999999"),
    "-1e999999999 for a decimal attribute":
        b'{"type": "Temperature", "sensor": 1, "room": 1, "value": -1e999999999}',
    "exponent beyond a decimal": sun(b"1e99999999999999999999"),
    "1e-999999999 for an int attribute": sun(b"1e-999999999"),
    "invalid UTF-8 byte": b"\xff",
    "invalid UTF-8 in a string": sun(facade=b'"\xff"'),
    "truncated UTF-8 sequence": sun(facade=b'"\xe2\x82"'),
    "overlong UTF-8 encoding": sun(facade=b'"\xc0\xaf"'),
    "UTF-8 encoded surrogate": sun(facade=b'"\xed\xa0\x80"'),
    "lone surrogate escape": b'{"type": "GlassBreak", "sensor": 1, "room": 1, '
                             b'"zone": "\\ud800", "level": 1}',
    "repeated attribute": b'{"type": "Sun", "facade": "N", "facade": "S", "irradiance": 5}',
    "array instead of object": b"[]",
    "number instead of object": b"1",
    "string instead of object": b'"Sun"',
    "null instead of object": b"null",
    "10 MB bad enum value": sun(facade=b'"' + b"X" * (10 * MiB) + b'"'),
    "8 MB of escapes as an enum value": sun(facade=b'"' + b"\\n" * (4 * MiB) + b'"'),
    "40 MB line": sun(facade=b'"' + b"X" * (40 * MiB) + b'"'),
    "1 MB unknown type name": b'{"type": "' + b"T" * MiB + b'"}',
    "100,000 unknown attributes":
        b'{"type": "Sun", ' + b", ".join(b'"k%d": 1' % i for i in range(100_000)) + b"}",
    "1 MB attribute name": b'{"type": "Sun", "' + b"a" * MiB + b'": 1}',
    "raw escape character in a string": sun(facade=b'"\x1b[2J"'),
    "NUL byte": b"\x00" + GOOD_EVENT,
    "BOM in the middle of a file": b"\xef\xbb\xbf" + GOOD_EVENT,
    "truncated object": b'{"type": "Sun"',
    "type is a number": b'{"type": 5}',
    "empty object": b"{}",
    "string for an int attribute": sun(b'"5"'),
    "boolean for an int attribute": sun(b"true"),
    "text after the object": GOOD_EVENT + b" {}",
    "a comment": GOOD_EVENT + b" // why",
    "line separator U+2028 outside a string": GOOD_EVENT[:-1] + b"\xe2\x80\xa8}",
    "CR-only line ends": (sun(b"5000"), b"\r"),
    "CRLF line ends": (sun(b"5000"), b"\r\n"),
}

# Line 2 of a profile file (line 1 is good).
PROFILE_LINES: dict[str, bytes | tuple[bytes, bytes]] = {
    "16 MB quoted string": b'p: GlassBreak(zone = "' + b"a" * (16 * MiB) + b'")',
    "60 KB quoted string": b'p: GlassBreak(zone = "' + b"a" * 60_000 + b'")',
    "70 KB line": b"p: Sun(" + b" " * 70_000 + b")",
    "300 conditions": b"p: Sun(" + b", ".join([b"irradiance > 1"] * 300) + b")",
    "2,000-digit number": b"p: Sun(irradiance > " + b"9" * 2000 + b")",
    "invalid escape": b'p: GlassBreak(zone = "\\q")',
    "lone surrogate escape": b'p: GlassBreak(zone = "\\ud800")',
    "raw tab in a string": b'p: GlassBreak(zone = "a\tb")',
    "unterminated string": b'p: GlassBreak(zone = "abc)',
    "unterminated 200 KB string": b'p: GlassBreak(zone = "' + b"a" * 200_000,
    "30,000 parentheses": b"p: Sun" + b"(" * 30_000,
    "invalid UTF-8": b"p: Sun(facade = \xff)",
    "60,000-character id without a colon": b"p" * 60_000 + b" Sun()",
    "MIN on a string attribute": b"p: GlassBreak(zone = MIN)",
    "30,000-character unknown type": b"p: " + b"T" * 30_000 + b"()",
    "20,000-value set with one outside": b"p: Sun(irradiance in {"
        + b",".join([b"1"] * 19_999 + [b"5000"]) + b"})",
    "empty set": b"p: Sun(irradiance in {})",
    "reversed range": b"p: Sun(irradiance in [9, 1])",
    "unsatisfiable": b"p: Sun(irradiance > 9, irradiance < 3)",
    "repeated id": b"ok: Sun()",
    "BOM in the middle of a file": b"\xef\xbb\xbfp: Sun()",
    "NUL byte": b"p: Sun(\x00)",
    "escape character": b"p: Sun(\x1b[2J)",
    "line separator U+2028": b"p: Sun(facade = N\xe2\x80\xa8)",
    "Bittner TYPE twice": b"p: PROFILE(PRI(TYPE=Sun,TYPE=Sun))",
    "Bittner without TYPE": b"p: PROFILE(PRI(irradiance>5))",
    "bare word for a string": b"p: GlassBreak(zone = north)",
    "exponent in a number": b"p: Sun(irradiance > 1e3)",
    "unknown attribute": b"p: Sun(" + b"x" * 30_000 + b" = 1)",
    "CR-only line ends": (b"p: Sun(irradiance > 5000)", b"\r"),
}

DEEP_TOML = b"a = " + b"[" * 100_000
# Whole schema files.
SCHEMAS: dict[str, bytes] = {
    "arrays nested 100,000 deep": b"[T]\n" + DEEP_TOML,
    "inline tables nested 100,000 deep": b"[T]\na = " + b"{b = " * 100_000,
    "dotted key of 100,000 parts": b"[T]\n" + b".".join([b"a"] * 100_000) + b' = "string"',
    "table header of 100,000 parts": b"[" + b".".join([b"T"] * 100_000) + b"]",
    "invalid UTF-8": b'[T]\na = "\xff"\n',
    "5,000-digit bound": b'[T]\na = "int[0,' + b"9" * 5000 + b']"\n',
    "5,000-digit TOML integer": b"[T]\na = " + b"9" * 5000 + b"\n",
    "100,000 repeated enum labels": b'[T]\na = "enum[' + b",".join([b"A"] * 100_000) + b']"\n',
    "1 MB type name": b"[" + b"-" * MiB + b']\na = "string"\n',
    "20 MB file": b"[T]\n" + b"#" * (20 * MiB) + b'\na = "string"\n',
    "empty file": b"",
    "NUL byte": b'[T]\na = "str\x00ing"\n',
    "30-digit decimal bound": b'[T]\na = "decimal[0,' + b"1" * 30 + b',1]"\n',
    "attribute that is not a string": b"[T]\na = 5\n",
    "reserved word as a label": b'[T]\na = "enum[LOW,in]"\n',
    "lone surrogate escape": b'[T]\na = "\\ud800"\n',
    "unterminated 1 MB multi-line string": b'[T]\na = """' + b"x" * MiB,
    "empty domain": b'[T]\na = "int[5,1]"\n',
}

# Whole network config files (read by ``siftbus publish --config``).
CONFIG_HEAD = b'[network]\nschema = "' + str(SCHEMA).encode() + b'"\n'
CONFIGS: dict[str, bytes] = {
    "arrays nested 100,000 deep": CONFIG_HEAD + DEEP_TOML,
    "inline tables nested 100,000 deep": CONFIG_HEAD + b"x = " + b"{b = " * 100_000,
    "dotted key of 100,000 parts": CONFIG_HEAD + b".".join([b"a"] * 100_000) + b" = 1",
    "invalid UTF-8": CONFIG_HEAD + b'protocol = "\xff"\n',
    "5,000-digit port": CONFIG_HEAD + b"[brokers.B0]\nport = " + b"9" * 5000 + b"\n",
    "port 1e999": CONFIG_HEAD + b"[brokers.B0]\nport = 1e999\n",
    "schema nested 100,000 deep": b'[network]\nschema = "deep.toml"\n[brokers.B0]\nport = 1\n',
    "schema file missing": b'[network]\nschema = "none.toml"\n[brokers.B0]\nport = 1\n',
    "1 MB broker name": CONFIG_HEAD + b"[brokers." + b"B" * MiB + b"]\nport = 1\n",
    "100,000 unknown neighbours": CONFIG_HEAD + b"[brokers.B0]\nport = 1\nneighbours = ["
        + b", ".join(b'"N%d"' % i for i in range(100_000)) + b"]\n",
    "20 MB file": CONFIG_HEAD + b"#" * (20 * MiB) + b"\n",
}

# Text given as options: (option, value).
EXPLAIN_OPTIONS: dict[str, tuple[str, str]] = {
    "event nested 100,000 deep": ("--event", "[" * 100_000),
    "event with a 5,000-digit integer": ("--event", sun(b"9" * 5000).decode()),
    "event with NaN": ("--event", sun(b"NaN").decode()),
    "event with a lone surrogate escape": ("--event", '{"type": "Sun", "facade": "\\udfff"}'),
    "event with an invalid UTF-8 byte": ("--event", '{"type": "Sun", "facade": "\udcff"}'),
    "event with a 100 KB bad value": ("--event", sun(facade=b'"' + b"Q" * 100_000 + b'"')
                                      .decode()),
    "profile line of 100 KB": ("--profile", "Sun(" + " " * 100_000 + ")"),
    "profile with an invalid escape": ("--profile", 'GlassBreak(zone = "\\x41")'),
    "profile with 300 conditions": ("--profile", "Sun(" + ", ".join(["irradiance > 1"] * 300)
                                    + ")"),
    "profile with an escape character": ("--profile", "Sun(irradiance \x1b> 5)"),
}

QOS: dict[str, str] = {
    "nested 100,000 deep": "[" * 100_000,
    "5,000-digit integer": '{"OrderPolicy": ' + "9" * 5000 + "}",
    "NaN": '{"OrderPolicy": NaN}',
    "not an object": "[1, 2]",
}


def file_with_bad_line_2(path: Path, good: bytes, bad: bytes | tuple[bytes, bytes]) -> Path:
    line, sep = bad if isinstance(bad, tuple) else (bad, b"\n")
    path.write_bytes(good + sep + line + sep)
    return path


# match reads profile and schema files with the functions check uses (load_profiles,
# load_schema): one case per class of defect is enough there; every event line goes
# through match too, because match has its own fast path for events.
MATCH_PROFILE_CASES = ["16 MB quoted string", "300 conditions", "invalid escape",
                       "lone surrogate escape", "invalid UTF-8", "30,000 parentheses",
                       "2,000-digit number", "CR-only line ends"]
MATCH_SCHEMA_CASES = ["arrays nested 100,000 deep", "dotted key of 100,000 parts",
                      "invalid UTF-8", "5,000-digit bound", "5,000-digit TOML integer",
                      "20 MB file"]
