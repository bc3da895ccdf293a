"""Bad ETCL constraints and bad event inputs, as a hostile user and a hostile client send
them: through ``siftbus etcl eval`` (one error line, exit 2, no traceback, time and memory
bounded) and through channel filters created over the network (an error reply, and the
server keeps serving everyone, its memory bounded)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import siftbus
from hostile import run_bad, run_cli
from siftbus.errors import SiftbusError

MB = 1024 * 1024

BAD_CONSTRAINTS: list[tuple[str, str, str]] = [  # (name, constraint, expected in the line)
    ("993 parentheses", "(" * 993 + "TRUE" + ")" * 993, "line 1, column 101: ETCL "
     "constraint nests deeper than 100 levels"),
    ("497 not (", "not (" * 497 + "TRUE" + ")" * 497, "column 251: ETCL constraint nests"),
    ("deep arithmetic", "(1 + " * 600 + "1" + ")" * 600 + " > 0", "nests deeper"),
    ("keyword first", "and TRUE", "line 1, column 1: unexpected keyword 'and'"),
    ("in first", "in $codes", "line 1, column 1: unexpected keyword 'in'"),
    ("double quotes", '$x == "HVAC"', "column 7: unexpected character '\"' in ETCL "
     "constraint (ETCL strings are in single quotes"),
    ("too long", "$x == '" + "a" * 40_000 + "'", "longer than the limit of 32,768"),
    ("ends early", "$x ==", "ends too early"),
    ("5,000 digits", "$x == 1" + "9" * 5000, "column 7: number 19999"),
    ("index digits", "$.a[" + "9" * 5000 + "] == 1", "has too many digits"),
    ("exist literal", "exist 3", "column 7"),
    ("chained comparison", "1 < 2 < 3", "column 7"),
    ("second line", "$a == 1 and\n  $b === 2", "line 2"),
    ("invalid UTF-8", "$x == 1 \udcff", "column 9: unexpected character '\\udcff'"),
    ("control character", "$x\x07== 1", "column 3: unexpected character '\\x07'"),
    ("unclosed string", "$x == 'abc", "column 7"),
    ("unfinished component", "default $x.", "column 11"),
]


@pytest.fixture(scope="module")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("etcl") / "events.jsonl"
    f.write_text(json.dumps({"domain_name": "Telecom", "type_name": "Alarm",
                             "filterable_data": {"x": 1, "codes": [1, 2]}}) + "\n",
                 encoding="utf-8")
    return f


@pytest.mark.parametrize("name, constraint, where", BAD_CONSTRAINTS,
                         ids=[c[0] for c in BAD_CONSTRAINTS])
def test_bad_constraints_through_the_cli(events_file: Path, name: str, constraint: str,
                                         where: str) -> None:
    line = run_bad(["etcl", "eval", "--constraint", constraint, "--events", str(events_file)],
                   max_rss=300 * MB)
    assert line.startswith("siftbus: error: --constraint, ")
    assert where in line


GOOD_BUT_BIG = [
    " and ".join(["$x == 1"] * 990),
    " or ".join(["$x == 2"] * 990 + ["TRUE"]),
    " + ".join(["$x"] * 990) + " == 990",
    "(" * 99 + "$x == 1" + ")" * 99,
]


@pytest.mark.parametrize("constraint", GOOD_BUT_BIG, ids=["and", "or", "plus", "99 parens"])
def test_big_constraints_within_the_limits_work(events_file: Path, constraint: str) -> None:
    o = run_cli(["etcl", "eval", "--constraint", constraint, "--events", str(events_file),
                 "--explain"])
    assert (o.returncode, o.stdout, o.stderr) == (0, "true\n", "")


def nested_json(levels: int) -> str:
    return "[" * levels + "]" * levels


GOOD_LINE = json.dumps({"domain_name": "d", "type_name": "t", "filterable_data": {"x": 1}})

BAD_EVENTS: list[tuple[str, bytes, str]] = [  # (name, file content, expected in the line)
    ("100,000 deep", nested_json(100_000).encode(), "line 1, column 203: JSON nested deeper"),
    ("900 deep in filterable_data", (GOOD_LINE + "\n" + json.dumps(
        {"domain_name": "d", "type_name": "t", "filterable_data": {"x": 1}})[:-2]
        + ', "deep": ' + nested_json(900) + "}}\n").encode(),
     "line 2, column 276: JSON nested deeper"),
    ("invalid UTF-8", b"\xff\n", "line 1, column 1: not UTF-8: byte 0xff"),
    ("invalid UTF-8 later", (GOOD_LINE + "\n" + '{"domain_name": "\xe9"}').encode("latin-1"),
     "line 2, column 18: not UTF-8: byte 0xe9"),
    ("5,000 digits", ('{"filterable_data": {"x": ' + "9" * 5000 + "}}").encode(),
     "line 1, column 27: JSON integer of more than 1000 digits"),
    ("not an object", b"5\n", "line 1, column 1: a structured event must be an object"),
    ("bad header", b'{"header": 5}\n', "line 1"),
    ("bad union", b'{"any": {"@union": {"d": 1, "default": "yes"}}}\n',
     "@union default must be true or false"),
    ("bad struct", b'{"any": {"@struct": {"members": [1]}}}\n', "@struct members"),
    ("name not a string", b'{"domain_name": 5}\n', "domain_name must be a string"),
    ("property triple", b'{"filterable_data": [[1, 2, 3]]}\n', "name and a value"),
    ("truncated", b'{"a": \n', "line 1, column 7: invalid JSON"),
    ("big bad line", b'{"filterable_data": {"s": "' + b"a" * 50_000_000 + b'"', "line 1"),
]


@pytest.mark.parametrize("name, content, where", BAD_EVENTS, ids=[e[0] for e in BAD_EVENTS])
def test_bad_events_through_the_cli(tmp_path: Path, name: str, content: bytes,
                                    where: str) -> None:
    f = tmp_path / "events.jsonl"
    f.write_bytes(content)
    line = run_bad(["etcl", "eval", "--constraint", "TRUE", "--events", str(f)],
                   max_rss=400 * MB)
    assert f"siftbus: error: {f}, " in line
    assert where in line


def test_bad_events_on_stdin() -> None:
    line = run_bad(["etcl", "eval", "--constraint", "TRUE", "--events", "-"],
                   stdin=GOOD_LINE.encode() + b"\n" + nested_json(100_000).encode())
    assert "line 2, column 203: JSON nested deeper" in line
    line = run_bad(["etcl", "eval", "--constraint", "TRUE", "--events", "-"], stdin=b"\xff\n")
    assert "line 1, column 1: not UTF-8" in line


def test_a_leading_bom_is_skipped_as_everywhere(tmp_path: Path) -> None:
    f = tmp_path / "bom.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"domain_name": "d"}\n')
    out = run_cli(["etcl", "eval", "--constraint", "TRUE", "--events", str(f)])
    assert (out.returncode, out.stdout) == (0, "true\n"), out.stderr


def test_other_bad_arguments(tmp_path: Path) -> None:
    assert "does not exist" in run_bad(["etcl", "eval", "--constraint", "TRUE", "--events",
                                        str(tmp_path / "nope.jsonl")])
    f = tmp_path / "e.jsonl"
    f.write_text(GOOD_LINE + "\n", encoding="utf-8")
    assert "--type must be DOMAIN,TYPE" in run_bad(["etcl", "eval", "--constraint", "TRUE",
                                                     "--events", str(f), "--type", "x" * 5000])


# -- over the network: a channel server in a subprocess, the public client API --------


@pytest.fixture(scope="module")
def channel_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """(port, pid) of ``siftbus channel serve`` on 127.0.0.1, an ephemeral port."""
    port_file = tmp_path_factory.mktemp("server") / "port"
    proc = subprocess.Popen([sys.executable, "-m", "siftbus", "channel", "serve", "--port", "0",
                             "--port-file", str(port_file)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "channel server did not start"
            time.sleep(0.05)
        yield int(port_file.read_text()), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
async def client(channel_server: tuple[int, int]) -> AsyncIterator[Any]:
    c = await siftbus.ChannelClient.connect("127.0.0.1", channel_server[0])
    yield c
    await c.close()


NETWORK_CONSTRAINTS = [c for name, c, _ in BAD_CONSTRAINTS if name != "invalid UTF-8"] + [
    " and ".join(["$x == 1"] * 5000),  # longer than the limit
]


async def test_an_8_mb_constraint_is_refused_at_the_wire_and_the_server_keeps_serving(
        channel_server: tuple[int, int]) -> None:
    """The string once raised the server to 4.1 GB; the frame transport's max_string now
    refuses the request before any ETCL parsing, and ends only that connection."""
    server = psutil.Process(channel_server[1])
    before = server.memory_info().rss
    c = await siftbus.ChannelClient.connect("127.0.0.1", channel_server[0])
    try:
        cid = await c.call("create_channel")
        with pytest.raises(SiftbusError):
            await asyncio.wait_for(c.call("add_filter", channel=cid, admin=0, side="consumer",
                                          constraints=[[[], "$x == '" + "a" * 8 * MB + "'"]]),
                                   60)
    finally:
        await c.close()
    other = await siftbus.ChannelClient.connect("127.0.0.1", channel_server[0])
    try:
        assert await other.call("get_qos", channel=cid) is not None
    finally:
        await other.close()
    assert server.memory_info().rss - before < 300 * MB


async def test_bad_constraints_over_the_network(client: Any,
                                                channel_server: tuple[int, int]) -> None:
    server = psutil.Process(channel_server[1])
    cid = await client.call("create_channel")
    before = server.memory_info().rss
    for text in NETWORK_CONSTRAINTS:
        with pytest.raises(SiftbusError) as info:
            await asyncio.wait_for(client.call("add_filter", channel=cid, admin=0,
                                               side="consumer", constraints=[[[], text]]), 60)
        assert type(info.value).__name__ == "InvalidConstraint"
        assert await client.call("get_qos", channel=cid) is not None  # still serving
    grown = server.memory_info().rss - before
    assert grown < 300 * MB, f"the server grew by {grown / MB:.0f} MiB"
    # the limits accept what they promise: 990 terms, 99 parentheses
    for text in GOOD_BUT_BIG:
        await client.call("add_filter", channel=cid, admin=0, side="consumer",
                          constraints=[[[], text]])


def nested_value(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


BAD_NETWORK_EVENTS = [
    {"domain_name": "d", "type_name": "t", "filterable_data": {"deep": nested_value(150)}},
    {"domain_name": "d", "type_name": "t", "remainder_of_body": nested_value(500)},
    {"domain_name": "d", "type_name": "t",
     "filterable_data": {"u": {"@union": {"d": 1, "member": 7}}}},
    {"domain_name": "d", "type_name": "t",
     "filterable_data": {"s": {"@struct": {"members": {}, "colour": "red"}}}},
]


async def test_bad_events_over_the_network(client: Any) -> None:
    cid = await client.call("create_channel")
    consumer = await client.call("obtain_consumer", channel=cid)
    await client.call("add_filter", channel=cid, proxy=consumer, side="consumer",
                      constraints=[[[], "$x >= 1"]])
    supplier = await client.call("obtain_supplier", channel=cid)
    for event in BAD_NETWORK_EVENTS:
        with pytest.raises(SiftbusError):
            await client.call("push", channel=cid, proxy=supplier, events=[event])
    good = [{"domain_name": "d", "type_name": "t", "filterable_data": {"x": i}}
            for i in range(3)]
    assert await client.call("push", channel=cid, proxy=supplier, events=good) == 3
    got = await client.call("pull", channel=cid, proxy=consumer, max=10, timeout=5.0)
    assert len(got) == 2  # x = 1 and x = 2: the filter and the channel still work
