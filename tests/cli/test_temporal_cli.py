"""``siftbus temporal``: the collection-synchronisation application (issue 20, item 4) in
process and on a real broker, queries in both directions, and bad input through the
real command (one error line, exit 2)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostile import ROOT, run_bad, run_cli
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.model import load_schema

EX = ROOT / "examples" / "collections"
DOCS, SCENARIO, SCHEMA = (str(EX / "documents.jsonl"), str(EX / "scenario.jsonl"),
                          str(EX / "schema.toml"))


def test_sync_plays_the_example_as_expected() -> None:
    out = run_cli(["temporal", "sync", DOCS, SCENARIO, "--schema", SCHEMA])
    assert out.returncode == 0, out.stderr
    got = [json.loads(x) for x in out.stdout.splitlines()]
    want = [json.loads(x) for x in (EX / "expected-sync.jsonl").read_text().splitlines()]
    assert got == want
    # what the records say is consistent: each move's collection is the previous one
    # changed by the changes in between and by the move's own differences
    held: set[str] = set()
    for rec in got:
        if "context" in rec:
            assert set(rec["collection"]) == (held - set(rec["removed"])) | set(rec["added"])
            held = set(rec["collection"])
        elif rec["change"] == "add":
            assert rec["id"] not in held
            held.add(rec["id"])
        elif rec["change"] == "remove":
            held.remove(rec["id"])
        else:
            assert rec["id"] in held


def test_query_both_directions() -> None:
    out = run_cli(["temporal", "query", DOCS, "Document(room = 121)", "--schema", SCHEMA,
                   "--at", "7300"])
    assert json.loads(out.stdout)["ids"] == ["agenda-121", "fire-drill", "photo-121",
                                             "plan-floor-4", "wifi-guests"]
    out = run_cli(["temporal", "query", DOCS, "Document(room in [1, 30], kind = menu)",
                   "--schema", SCHEMA, "--at", "3600", "--semantics", "covered-by"])
    # 09:00: breakfast is served, lunch (from 11:00) is not valid yet
    assert json.loads(out.stdout)["ids"] == ["menu-breakfast"]
    out = run_cli(["temporal", "query", DOCS, "Document(room in [1, 30])", "--schema",
                   SCHEMA, "--at", "12000", "--semantics", "covered-by"])
    assert json.loads(out.stdout)["ids"] == ["menu-lunch", "photo-lobby", "plan-basement"]
    # reverse: the documents that, as covered-by filters, select this subspace
    out = run_cli(["temporal", "query", DOCS, "Document(room = 2, kind = menu)", "--schema",
                   SCHEMA, "--at", "100", "--semantics", "covered-by", "--reverse"])
    assert json.loads(out.stdout)["ids"] == ["menu-breakfast"]


async def test_sync_on_a_real_broker_gives_the_same_collections() -> None:
    """The application on a broker over TCP (the scenario clock 4,000x real time): each
    move leaves the collection the in-process run leaves."""
    want = [json.loads(x) for x in (EX / "expected-sync.jsonl").read_text().splitlines()]
    async with BrokerServer(BrokerNode("B1", load_schema(SCHEMA))) as srv:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "siftbus", "temporal", "sync", DOCS, SCENARIO, "--schema",
            SCHEMA, "--broker", f"127.0.0.1:{srv.port}", "--speed", "4000",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()[-2000:]
        got = [json.loads(x) for x in out.decode().splitlines()]
        assert [r for r in got if "context" in r] == [r for r in want if "context" in r]
        changes = [(r["change"], r["id"], r["reason"], r.get("version")) for r in got
                   if "change" in r]
        assert changes == [(r["change"], r["id"], r["reason"], r.get("version")) for r in want
                           if "change" in r]
        assert srv.node.retained.df.notification_count == 0  # it withdrew what it left


@pytest.fixture
def files(tmp_path: Path) -> Path:
    return tmp_path


BAD_DOCS = [
    ('{"id": "a", "subspace": "Document(room = 999)"}', "line 1, column 35"),
    ('{"id": "a", "subspace": "Document(rom = 9)"}', "line 1, column 35"),
    ('{"id": "a", "subspace": "Document()"}\n{"id": "a", "subspace": "Document()"}',
     "line 2, column 8: notification id 'a' appears twice (first on line 1)"),
    ('{"id": "a", "subspace": "Document()", "end": "x"}', "line 1, column 46"),
    ('not json', "line 1, column 1"),
    ('{"id": "a", "subspace": "Document()", "ttl": 0}', "line 1, column 46: ttl"),
    ('{"id": "a", "subspace": "Document(room in {' + ", ".join(["1"] * 40000) + '})"}',
     "exceeds the limit"),
]


@pytest.mark.parametrize(("text", "where"), BAD_DOCS)
def test_bad_documents(files: Path, text: str, where: str) -> None:
    p = files / "docs.jsonl"
    p.write_text(text + "\n")
    run_bad(["temporal", "sync", str(p), SCENARIO, "--schema", SCHEMA], where=where)


BAD_SCENARIOS = [
    ('{"t": 5, "context": "Document(room = 1)"}\n{"t": 1, "context": "Document()"}',
     "line 2, column 7: time goes back"),
    ('{"t": 0, "jump": 3}', "line 1, column 10: a step has 't' and one of context"),
    ('{"t": 0, "context": "Document()", "withdraw": "x"}', "line 1, column 35: a step has"),
    ('{"t": "noon", "context": "Document()"}', "line 1, column 7: 't' must be"),
    ('{"t": 0, "context": "Document()"}\n{"t": 3,  "context": "Document(rom = 1)"}',
     "line 2, column 32: Document has no attribute 'rom'"),
    ('{"t": 0, "context": 5}', "line 1, column 21: 'context' must be a profile text"),
    ('{"t": 0, "withdraw": 5}', "line 1, column 22: 'withdraw' names"),
    ('{"t": 0, "publish": 5}', "line 1, column 21: 'publish' must be a notification"),
    ('{"t": 0, "withdraw": "nope"}', "line 1, column 22: no notification 'nope'"),
    ('{"t": 0, "publish": {"id": "plan-basement", "subspace": "Document()"}}',
     "line 1, column 21: notification id 'plan-basement' is already published"),
    ('{"t": 0, "update": {"subspace": "Document()"}}', "line 1, column 20: 'id' must be"),
    ('[1]', "line 1, column 1: a step must be a JSON object"),
    ('{"t": 0, "t": 1, "context": "Document()"}', "line 1, column 10: key 't' is given twice"),
    ('{"t": 0, "publish": {"id": "x", "subspace": "Document(rom = 9)"}}',
     "line 1, column 55: Document has no attribute 'rom'"),
    ('{"t": 0, "context": ' + "[" * 200 + "]" * 200 + "}", "nested deeper than"),
]


@pytest.mark.parametrize(("text", "where"), BAD_SCENARIOS)
def test_bad_scenarios(files: Path, text: str, where: str) -> None:
    p = files / "scenario.jsonl"
    p.write_text(text + "\n")
    run_bad(["temporal", "sync", DOCS, str(p), "--schema", SCHEMA], where=where)


@pytest.mark.parametrize("which", ["documents", "scenario"])
def test_files_that_are_not_utf8_are_refused_with_their_place(files: Path, which: str) -> None:
    p = files / "bad.jsonl"
    first = (b'{"id": "a", "subspace": "Document()"}' if which == "documents"
             else b'{"t": 0, "context": "Document()"}')
    p.write_bytes(first + b'\n{"id": "caf\xe9"}\n')
    args = [str(p), SCENARIO] if which == "documents" else [DOCS, str(p)]
    run_bad(["temporal", "sync", *args, "--schema", SCHEMA], where="line 2, column")


def test_a_bom_and_crlf_line_ends_are_read_like_plain_lines(files: Path) -> None:
    docs = files / "docs.jsonl"
    docs.write_bytes(b"\xef\xbb\xbf" + Path(DOCS).read_bytes().replace(b"\n", b"\r\n"))
    outs = [run_cli(["temporal", "query", d, "Document(room = 121)", "--schema", SCHEMA,
                     "--at", "7300"]) for d in (DOCS, str(docs))]
    assert [o.returncode for o in outs] == [0, 0], outs[1].stderr
    assert json.loads(outs[1].stdout)["ids"] == json.loads(outs[0].stdout)["ids"] != []


def test_bad_queries() -> None:
    run_bad(["temporal", "query", DOCS, "Document(floor = 1)", "--schema", SCHEMA],
            where="FILTER")
    run_bad(["temporal", "query", "/nonexistent.jsonl", "Document()", "--schema", SCHEMA],
            where="cannot read")
    run_bad(["temporal", "sync", DOCS, SCENARIO, "--schema", SCHEMA, "--broker",
             "127.0.0.1:1"], where="")


@pytest.mark.parametrize("at", ["nan", "inf", "-inf"])
def test_query_at_a_time_that_is_no_number_blames_the_option(at: str) -> None:
    err = run_bad(["temporal", "query", DOCS, "Document()", "--schema", SCHEMA, "--at", at])
    assert "--at must be a finite number of seconds" in err and "documents" not in err
