"""Bad input for every parser, through the real ``siftbus`` command, as a hostile user sends it.

One corpus per parser (event JSON lines, profile lines, schema files, network configs,
JSON and profile text given as options), each input run through every command that reads
it: ``check``, ``match``, ``publish`` (against a broker started here on port 0),
``explain`` and ``channel create --qos``. ``run_bad`` asserts the error contract each
time: exit 2, one ``siftbus: error:`` line of readable length naming the place, no
traceback, bounded time and memory. The inputs are generated in ``hostile_inputs.py``
(some are 40 MB); every one of them failed one of these assertions, or hung, before the
parsers were hardened, or pins a rule that must stay (the line number of a CR-only file).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostile import run_bad
from hostile_inputs import (
    CONFIGS,
    DEEP_TOML,
    EVENT_LINES,
    EVENTS,
    EXPLAIN_OPTIONS,
    GOOD_EVENT,
    GOOD_PROFILE,
    MATCH_PROFILE_CASES,
    MATCH_SCHEMA_CASES,
    MAX_RSS,
    PROFILE_LINES,
    PROFILES,
    QOS,
    SCHEMA,
    SCHEMAS,
    file_with_bad_line_2,
)
from siftbus.broker.node import BrokerNode
from siftbus.broker.server import BrokerServer
from siftbus.model import load_schema


@pytest.fixture(scope="module")
def broker_port() -> Iterator[int]:
    """A broker on 127.0.0.1, port 0, on its own event loop thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = BrokerServer(BrokerNode("B0", load_schema(SCHEMA)), "127.0.0.1", 0)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield server.port
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@pytest.mark.parametrize("name", EVENT_LINES)
@pytest.mark.parametrize("command", ["check", "match", "publish"])
def test_bad_event_files(command: str, name: str, tmp_path: Path, broker_port: int) -> None:
    f = file_with_bad_line_2(tmp_path / "events.jsonl", GOOD_EVENT, EVENT_LINES[name])
    args = {"check": ["check", "--schema", str(SCHEMA), "--events", str(f)],
            "match": ["match", "--schema", str(SCHEMA), "--profiles", str(PROFILES),
                      "--events", str(f)],
            "publish": ["publish", "--broker", f"127.0.0.1:{broker_port}", str(f)]}[command]
    run_bad(args, where=f"{f}, line 2", max_rss=MAX_RSS)




@pytest.mark.parametrize(("command", "name"), [("check", n) for n in PROFILE_LINES]
                         + [("match", n) for n in MATCH_PROFILE_CASES])
def test_bad_profile_files(command: str, name: str, tmp_path: Path) -> None:
    f = file_with_bad_line_2(tmp_path / "profiles.txt", GOOD_PROFILE, PROFILE_LINES[name])
    args = {"check": ["check", "--schema", str(SCHEMA), "--profiles", str(f)],
            "match": ["match", "--schema", str(SCHEMA), "--profiles", str(f),
                      "--events", str(EVENTS)]}[command]
    run_bad(args, where=f"{f}, line 2", max_rss=MAX_RSS)


@pytest.mark.parametrize(("command", "name"), [("check", n) for n in SCHEMAS]
                         + [("match", n) for n in MATCH_SCHEMA_CASES])
def test_bad_schema_files(command: str, name: str, tmp_path: Path) -> None:
    f = tmp_path / "schema.toml"
    f.write_bytes(SCHEMAS[name])
    args = {"check": ["check", "--schema", str(f), "--events", str(EVENTS)],
            "match": ["match", "--schema", str(f), "--profiles", str(PROFILES),
                      "--events", str(EVENTS)]}[command]
    run_bad(args, where=str(f), max_rss=MAX_RSS)


@pytest.mark.parametrize("name", CONFIGS)
def test_bad_network_configs(name: str, tmp_path: Path) -> None:
    (tmp_path / "deep.toml").write_bytes(b"[T]\n" + DEEP_TOML)
    f = tmp_path / "net.toml"
    f.write_bytes(CONFIGS[name])
    run_bad(["publish", "--config", str(f), "--name", "B0", str(EVENTS)], where=str(f),
            max_rss=MAX_RSS)


@pytest.mark.parametrize("name", EXPLAIN_OPTIONS)
def test_bad_explain_options(name: str) -> None:
    option, value = EXPLAIN_OPTIONS[name]
    args = {"--event": GOOD_EVENT.decode(), "--profile": "Sun(irradiance > 1)", option: value}
    run_bad(["explain", "--schema", str(SCHEMA), "--profile", args["--profile"],
             "--event", args["--event"]], where=f"{option}, line 1", max_rss=MAX_RSS)


@pytest.mark.parametrize("name", QOS)
def test_bad_channel_qos(name: str, tmp_path: Path) -> None:
    run_bad(["channel", "create", "--store", str(tmp_path / "ch.sqlite"), "--qos", QOS[name]],
            where="--qos", max_rss=MAX_RSS)

