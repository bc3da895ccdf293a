"""Bad session input: a broker answers a bad HELLO session map with one ERROR and keeps
serving everyone else; the CLI and the config refuse bad session options with one line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hostile import run_bad
from siftbus.broker.config import parse_network
from siftbus.broker.server import read_frame
from siftbus.client import Client
from siftbus.errors import ConfigError
from siftbus.wire.frames import Message, MsgType, decode_error, encode

from .mobility import SCHEMA, close_all, start_tree


@pytest.mark.parametrize(("session", "words"), [
    ("phone", "must be a map"),
    ({"id": "p", "ack": -1}, "whole number"),
    ({"id": "p", "ack": "7"}, "whole number"),
    ({"id": "p", "from": 3}, "broker name"),
    ({"id": "p", "limits": {"max_count": 0}}, "positive"),
    ({"id": "p", "limits": {"max_cunt": 5}}, "unknown session limit"),
    ({"id": "p", "limits": []}, "must be a map"),
    ({"id": "p", "profiles": [["x", "NoSuchType", "p", {}]]}, ""),
    ({"id": "bad name!"}, "name"),
])
async def test_a_bad_session_hello_gets_one_error_and_others_are_served(
        session: Any, words: str) -> None:
    servers = await start_tree("acyclic", names=["B0"], edges=[])
    port = servers["B0"].port
    try:
        good = await Client.connect(port=port, session="good")
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(encode(Message(MsgType.HELLO, {"role": "client", "session": session})))
        msg, _ = await asyncio.wait_for(read_frame(r), 5)
        assert msg.type is MsgType.ERROR
        assert words in decode_error(msg.body).message
        w.close()
        await good.subscribe("T(a = 1)")  # still served
        assert servers["B0"].node.stats().sessions["sessions"] == 1
        await good.close()
    finally:
        await close_all(servers)


def test_a_file_without_session_numbers_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "got.jsonl"
    out.write_text('{"profile": "f"}\n')
    line = run_bad(["subscribe", "-b", "127.0.0.1:1", "--session", "s", "--out", str(out)],
                   timeout=30)
    assert "session number" in line and "got.jsonl" in line


def test_resuming_needs_a_session_or_a_profile() -> None:
    assert "at least one profile" in run_bad(["subscribe", "-b", "127.0.0.1:1"], timeout=30)


@pytest.mark.parametrize(("text", "words", "line"), [
    ('[network]\nhandoff = "teleport"\n[brokers.A]\nport = 1', "handoff must be", 2),
    ('[network]\nhandoff = "rendezvous"\n[brokers.A]\nport = 1', "needs protocol", 2),
    ('[network]\nstrategy = "merging"\nhandoff = "acyclic"\n[brokers.A]\nport = 1',
     "merging", 3),
    ('[network]\n[network.sessions]\nmax_count = 0\n[brokers.A]\nport = 1', "positive", 3),
    ('[network]\n[network.sessions]\nbuffer = 5\n[brokers.A]\nport = 1', "unknown", 3),
    ('[network]\n[network.sessions]\nhandoff_timeout = "x"\n[brokers.A]\nport = 1',
     "seconds", 3),
])
def test_bad_session_configs_are_refused_with_a_line(text: str, words: str,
                                                     line: int) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse_network(text, schema=SCHEMA)
    assert info.value.line == line


def test_a_bad_session_config_through_the_command(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('[T]\na = "int[0,9]"\n')
    cfg = tmp_path / "net.toml"
    cfg.write_text('[network]\nschema = "s.toml"\nhandoff = "teleport"\n[brokers.A]\n'
                   'port = 1\n')
    assert "handoff must be" in run_bad(["network", "stats", str(cfg)], where="net.toml")


async def test_a_fresh_process_behind_a_down_link_gets_one_error_and_others_are_served(
        ) -> None:
    """Only the session id, at B0 while its neighbour B1 is gone: the session could be
    held behind B1, so the client gets one ERROR (connect again later), no second
    session starts, and a client that knows its epoch is still served."""
    servers = await start_tree("acyclic")
    try:
        known = await Client.connect(port=servers["B0"].port, session="known")
        await servers["B1"].close()
        await asyncio.sleep(0.2)  # B0 sees the link go
        r, w = await asyncio.open_connection("127.0.0.1", servers["B0"].port)
        w.write(encode(Message(MsgType.HELLO, {"role": "client", "session": {"id": "m"}})))
        msg, _ = await asyncio.wait_for(read_frame(r), 5)
        w.close()
        assert msg.type is MsgType.ERROR
        err = decode_error(msg.body)
        assert "could not all be asked" in err.message and err.kind == "SessionBusy", err
        node = servers["B0"].node
        assert "m" not in node.sessions.sessions and "@m" not in node.clients
        await known.subscribe("T(a = 1)")  # still served
        await known.close()
    finally:
        await close_all(servers)
