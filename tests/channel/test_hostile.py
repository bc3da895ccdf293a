"""Bad channel requests as a hostile user makes them: through ``siftbus channel ...`` (one
error line, exit 2, no traceback, bounded time and memory: ``hostile.run_bad``; ``siftbus
etcl eval`` has its corpus in tests/test_etcl_hostile.py), and over the wire to a channel
server (an ERROR reply for each, and the server goes on serving everyone)."""

from __future__ import annotations

import asyncio
import re
import socket
import sqlite3
import struct
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from hostile import run_bad
from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel.remote import ChannelClient, ChannelServer
from siftbus.errors import ConnectionLostError, SiftbusError
from siftbus.lang.etcl import ConstraintLimits

from .servers import serving

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Paths the corpus refers to as @name."""
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    damaged = tmp_path / "damaged.db"
    with EventChannelFactory(damaged, dispatch=False) as f:
        f.create_channel({"ConnectionReliability": 1})
    db = sqlite3.connect(damaged)
    db.execute("UPDATE channels SET data = '{\"id\": 1, \"qos\": 7}'")
    db.commit()
    db.close()
    events = {
        "utf8": b'{"domain_name": "d"}\n{"domain_name": "\xff"}\n',
        "deep": DEEP.encode() + b"\n",
        "digits": b'{"remainder_of_body": ' + HUGE_INT.encode() + b"}\n",
        "header": b'{"domain_name": "d"}\n{"header": 5}\n',
        "anydeep": b'{"any": ' + DEEP.encode() + b"}\n",
        "fields": b'{"filterable_data": [["a", 1], 7]}\n',
    }
    out = {"store": str(tmp_path / "c.db"), "garbage": str(garbage), "damaged": str(damaged),
           "nodir": str(tmp_path / "no" / "such" / "dir" / "c.db"),
           "port_file": str(tmp_path / "no" / "such" / "port")}
    for name, data in events.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        out[name] = str(path)
    return out


@pytest.fixture(scope="module")
def garbage_server() -> Iterator[int]:
    """A TCP server that answers every connection with bytes that are no frame."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    stop = threading.Event()

    def serve() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield sock.getsockname()[1]
    stop.set()
    t.join(5)
    sock.close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


CLI_CORPUS: list[tuple[list[str], str]] = [
    # (arguments, words the error line must contain)
    (["channel", "create", "--store", "@store", "--qos", '{"Priority": 99999}'], "Priority"),
    (["channel", "create", "--store", "@store", "--qos", "[1]"], "must be a JSON object"),
    (["channel", "create", "--store", "@store", "--qos", '{"Nope": 1}'], "Nope"),
    (["channel", "create", "--store", "@store", "--qos", "[" * 100_000], "nested deeper"),
    (["channel", "create", "--store", "@store", "--qos", f'{{"Priority": {HUGE_INT}}}'],
     "digits"),
    (["channel", "create", "--store", "@store", "--qos", "\udcff"], "--qos, line 1"),
    (["channel", "create", "--store", "@store", "--qos", '{"Priority": 1.5}'], "Priority"),
    (["channel", "create", "--store", "@store", "--admin", '{"MaxQueueLength": -1}'],
     "MaxQueueLength"),
    (["channel", "create", "--store", "@store", "--admin", '{"RejectNewEvents": 1}'],
     "RejectNewEvents"),
    (["channel", "create", "--store", "@store", "--qos",
      '{"ConnectionReliability": 0, "EventReliability": 1}'], "EventReliability"),
    (["channel", "create", "--server", "nohost"], "--server must be HOST:PORT"),
    (["channel", "create", "--server", "127.0.0.1:99999"], "port 1-65535"),
    (["channel", "list", "--server", "127.0.0.1:@closed"], "cannot connect to the channel"),
    (["channel", "list", "--server", "x" * 100_000 + ":1"], "cannot reach"),
    (["channel", "list", "--server", "127.0.0.1:@garbage_server"], "channel service"),
    (["channel", "list"], "exactly one of --server"),
    (["channel", "list", "--store", "@store", "--server", "127.0.0.1:1"], "exactly one"),
    (["channel", "list", "--store", "@garbage"], "channel store"),
    (["channel", "list", "--store", "@damaged"], "damaged"),
    (["channel", "list", "--store", "@nodir"], "cannot open channel store"),
    (["channel", "destroy", "99", "--store", "@store"], "no channel 99"),
    (["channel", "serve", "--port", "99999"], "cannot listen"),
    (["channel", "serve", "--port", "0", "--port-file", "@port_file"], "port file"),
    (["channel", "serve", "--port", "0", "--store", "@garbage"], "channel store"),
]


@pytest.mark.parametrize(("args", "words"), CLI_CORPUS,
                         ids=[f"{i}-{' '.join(a[:2])}" for i, (a, _) in enumerate(CLI_CORPUS)])
def test_bad_channel_commands_give_one_error_line(args: list[str], words: str,
                                                  files: dict[str, str],
                                                  garbage_server: int) -> None:
    names = {**files, "closed": str(closed_port()), "garbage_server": str(garbage_server)}
    real = [re.sub(r"@(\w+)$", lambda m: names[m.group(1)], a) for a in args]
    line = run_bad(real, max_rss=512 * 1024 * 1024)
    assert words in line


# ---------------------------------------------------------------------------------------
# over the wire


@pytest.fixture
async def limited_server() -> AsyncIterator[ChannelServer]:
    async with serving(EventChannelFactory(
            constraint_limits=ConstraintLimits(max_length=10_000))) as srv:
        yield srv


def _deep(levels: int) -> Any:
    v: Any = 1
    for _ in range(levels):
        v = [v]
    return v


def _calls(cid: int, pid: int, sid: int) -> list[tuple[str, dict[str, Any], str]]:
    """(method, args, words the error must contain): one bad request each."""
    ok_event = StructuredEvent.of("d", "t", "e").to_dict()
    return [
        ("no_such_method", {}, "no method"),
        ("create_channel", {"qos": 5}, "must be a map"),
        ("create_channel", {"qos": {"Priority": "high"}}, "Priority"),
        ("create_channel", {"admin": {"MaxConsumers": -1}}, "MaxConsumers"),
        ("get_qos", {"channel": "1"}, "must be an integer"),
        ("get_qos", {"channel": True}, "must be an integer"),
        ("get_qos", {"channel": 999}, "no channel 999"),
        ("get_qos", {"channel": cid, "admin": 0, "side": "middle"}, "side must be"),
        ("set_qos", {"channel": cid, "qos": {"ConnectionReliability": 1}}, "Connection"),
        ("new_for_consumers", {"channel": cid, "op": "XOR_OP"}, "AND_OP or OR_OP"),
        ("obtain_consumer", {"channel": cid, "kind": "TYPED_EVENT"}, "client type"),
        ("obtain_consumer", {"channel": cid, "admin": 77}, "no consumer admin 77"),
        ("obtain_consumer", {"channel": cid, "qos": {"MaximumBatchSize": 5}},
         "MaximumBatchSize"),
        ("push", {"channel": cid, "proxy": sid, "events": 5}, "list of events"),
        ("push", {"channel": cid, "proxy": sid, "events": [5]}, "must be a map"),
        ("push", {"channel": cid, "proxy": sid, "events": [ok_event, {"header": 5}]},
         "event 1: header must be an object, not a number"),
        ("push", {"channel": cid, "proxy": sid, "events": [{"filterable_data": [1]}]},
         "filterable_data[0]"),
        ("push", {"channel": cid, "proxy": sid, "events": [{"structured": 3}]},
         "must be an object"),
        ("push", {"channel": cid, "proxy": sid, "events": [{"x": 1}]}, "unknown"),
        ("push", {"channel": cid, "proxy": sid,
                  "events": [{"remainder_of_body": _deep(900)}]}, "nests deeper than"),
        ("push", {"channel": cid, "proxy": sid, "events": [{"any": 1}]}, "structured"),
        ("push", {"channel": cid, "proxy": 999, "events": []}, "proxy 999"),
        ("push", {"channel": cid, "proxy": pid, "events": []}, f"proxy {pid}"),
        ("pull", {"channel": cid, "proxy": pid, "max": 0}, "max must be"),
        ("pull", {"channel": cid, "proxy": pid, "max": 10**9}, "max must be"),
        ("pull", {"channel": cid, "proxy": pid, "ack": "x"}, "ack must be"),
        ("pull", {"channel": cid, "proxy": sid}, f"proxy {sid}"),
        ("attach_push", {"channel": cid, "proxy": pid}, "push ProxySupplier"),
        ("ack", {"channel": cid, "proxy": pid, "seq": "x"}, "push ProxySupplier"),
        ("add_filter", {"channel": cid, "admin": 0, "constraints": "x"}, "must be a list"),
        ("add_filter", {"channel": cid, "admin": 0, "constraints": [[[], "$x =="]]},
         "invalid constraint"),
        ("add_filter", {"channel": cid, "admin": 0, "constraints": [[[], 5]]},
         "must be a string"),
        ("add_filter", {"channel": cid, "admin": 0, "constraints": [[5, "TRUE"]]},
         "event types must be a list"),
        ("add_filter", {"channel": cid, "admin": 0, "constraints": [[[[1, 2]], "TRUE"]]},
         "must be strings"),
        ("add_filter", {"channel": cid, "admin": 0,
                        "constraints": [[[], "'" + "x" * 20_000 + "'"]]},
         "longer than the limit of 10,000"),
        ("add_filter", {"channel": cid, "admin": 0,
                        "constraints": [[[], "(" * 1000 + "TRUE" + ")" * 1000]]},
         "nests deeper than 100 levels"),
        ("add_filter", {"channel": cid, "constraints": []}, "admin or proxy"),
        ("remove_filter", {"channel": cid, "admin": 0, "id": 99}, "no filter 99"),
        ("remove_filter", {"channel": cid, "id": 1}, "admin or proxy"),
        ("set_mapping_filter", {"channel": cid, "admin": 0, "which": "speed"}, "which must"),
        ("set_mapping_filter", {"channel": cid, "admin": 0, "side": "supplier",
                                "which": "priority"}, "mapping filters go on"),
        ("set_mapping_filter", {"channel": cid, "proxy": pid, "which": "priority",
                                "constraints": [["$x >", 1]]}, "invalid constraint"),
        ("disconnect", {"channel": cid, "proxy": 999}, "proxy 999"),
        ("resume", {"channel": cid, "proxy": pid}, "not suspended"),
        ("subscription_change", {"channel": cid, "added": [5]}, "subscription_change"),
        ("stats", {"channel": -1}, "no channel -1"),
    ]


async def test_bad_requests_get_an_error_and_the_server_goes_on(
        limited_server: ChannelServer) -> None:
    server = limited_server
    async with await ChannelClient.connect("127.0.0.1", server.port) as client, \
            await ChannelClient.connect("127.0.0.1", server.port) as bystander:
        cid = await client.call("create_channel")
        pid = await client.call("obtain_consumer", channel=cid)
        sid = await client.call("obtain_supplier", channel=cid)
        filters_before = len(server.service.factory.filter_factory.filters())
        corpus = _calls(cid, pid, sid)
        for method, args, words in corpus:
            with pytest.raises(SiftbusError) as info:
                await asyncio.wait_for(client.call(method, **args), 10)
            assert not isinstance(info.value, ConnectionLostError), (method, args)
            assert words in str(info.value), (method, str(info.value)[:300])
            assert len(str(info.value)) < 600
        # nothing half-made stayed behind, and everyone is still served
        assert len(server.service.factory.filter_factory.filters()) == filters_before
        assert server.errors_sent >= len(corpus)
        assert await bystander.call("push", channel=cid, proxy=sid,
                                    events=[StructuredEvent.of("d", "t", "ok").to_dict()]) == 1
        got = await client.call("pull", channel=cid, proxy=pid, max=10)
        assert [w["structured"]["header"]["fixed_header"]["event_name"] for _, w in got] \
            == ["ok"]


def _frame(body: Any, mtype: int = 12) -> bytes:
    payload = msgpack.packb(body, use_bin_type=True)
    return struct.pack(">IBB", len(payload) + 2, 1, mtype) + payload


async def test_bad_frames_get_an_error_and_other_connections_go_on(server: ChannelServer
                                                                   ) -> None:
    async with await ChannelClient.connect("127.0.0.1", server.port) as bystander:
        # bad CALLs on a live connection: an ERROR each, the connection goes on
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(_frame({"role": "client", "corr": 0}, 1))  # HELLO
        bad = [{"service": "channel", "method": "list_channels", "args": 5, "corr": 1},
               {"service": "channel", "method": 5, "corr": 2},
               {"service": "broker", "method": "list_channels", "corr": 3},
               {"service": "channel", "method": "create_channel",
                "args": {"qos": _deep(500)}, "corr": 4}]
        for body in bad:
            writer.write(_frame(body))
        writer.write(_frame({"corr": 5}, 7))  # a PUB frame: not for this server
        await writer.drain()
        seen = 0
        async with asyncio.timeout(10):
            while seen < len(bad) + 2:  # the ACK of HELLO, then one ERROR per frame
                (n,) = struct.unpack(">I", await reader.readexactly(4))
                frame = await reader.readexactly(n)
                seen += 1
                assert frame[1] in (9, 10)  # ACK, ERROR
                if seen > 1:
                    assert frame[1] == 10
        writer.write(_frame({"service": "channel", "method": "list_channels", "args": {},
                             "corr": 9}))
        await writer.drain()
        (n,) = struct.unpack(">I", await reader.readexactly(4))
        assert (await reader.readexactly(n))[1] == 13  # REPLY: still served
        writer.close()
        # a frame that is not a frame closes only that connection
        huge = _frame({"service": "channel", "method": "add_filter", "corr": 1,
                       "args": {"channel": 1, "admin": 0,
                                "constraints": [[[], "'" + "x" * 5_000_000 + "'"]]}})
        for junk in (b"\x00\x00\x00\x03\x09\x01\x00", b"\xff\xff\xff\xff",
                     struct.pack(">I", 5) + b"\x01\x0c\xc1\xc1\xc1",
                     _frame({"role": "client", "corr": 0}, 1) + huge):  # a string > 64 KiB
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            w.write(junk)
            await w.drain()
            assert await asyncio.wait_for(r.read(), 10)  # an ERROR, then EOF
            w.close()
        assert await bystander.call("create_channel") >= 1
