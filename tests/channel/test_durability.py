"""Kill-and-restart durability: the channel service runs in a subprocess with a SQLite
store, is SIGKILLed while a supplier pushes and a persistent consumer pulls, restarted on
the same store, and the consumer must get every accepted event exactly once, in order."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from siftbus.channel import EventChannelFactory, StructuredEvent
from siftbus.channel import qos as Q
from siftbus.channel.remote import ChannelClient, ChannelService, RemoteConsumer, RemoteSupplier
from siftbus.errors import SiftbusError

from .servers import start_server, stop_server

PERSISTENT = {Q.EVENT_RELIABILITY: Q.PERSISTENT, Q.CONNECTION_RELIABILITY: Q.PERSISTENT,
              Q.ORDER_POLICY: Q.FIFO_ORDER}


def ev(i: int) -> StructuredEvent:
    return StructuredEvent.of("d", "t", f"e{i}", filterable_data={"i": i})


async def _phase(port: int, setup: dict[str, Any] | None, start: int, count: int,
                 accepted: list[int], received: list[int], kill_after: int | None,
                 proc: subprocess.Popen[bytes] | None) -> dict[str, Any]:
    client = await ChannelClient.connect("127.0.0.1", port)
    try:
        if setup is None:
            cid = await client.call("create_channel", qos=PERSISTENT)
            consumer = await RemoteConsumer.obtain(client, cid)
            odd = await RemoteConsumer.obtain(client, cid)
            await odd.add_filter([[[], "$i - ($i / 2) * 2 == 1"]])
            supplier = await RemoteSupplier.obtain(client, cid)
            setup = {"channel": cid, "consumer": consumer.proxy, "odd": odd.proxy,
                     "supplier": supplier.proxy, "last": 0, "odd_last": 0, "odd_got": []}
        else:
            setup.pop("killed", None)
            consumer = RemoteConsumer(client, setup["channel"], setup["consumer"])
            odd = RemoteConsumer(client, setup["channel"], setup["odd"])
            supplier = RemoteSupplier(client, setup["channel"], setup["supplier"])
        consumer.last_seq, odd.last_seq = setup["last"], setup["odd_last"]
        try:
            for i in range(start, start + count, 5):
                batch = list(range(i, min(i + 5, start + count)))
                await supplier.push([ev(j) for j in batch])
                accepted.extend(batch)  # push returned: accepted (stored)
                if i % 10 == 0:
                    received.extend(e.filterable_data[0][1]
                                    for e in await consumer.pull(7, timeout=0))
                    setup["last"] = consumer.last_seq
                if kill_after is not None and len(accepted) >= kill_after and proc:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(10)
                    # the next call must fail; what was accepted before stays stored
                    await supplier.push([ev(10**6)])
            while True:
                got = await consumer.pull(50, timeout=0.3)
                setup["last"] = consumer.last_seq
                if not got:
                    break
                received.extend(e.filterable_data[0][1] for e in got)
            while True:
                got = await odd.pull(50, timeout=0.3)
                setup["odd_last"] = odd.last_seq
                if not got:
                    break
                setup["odd_got"].extend(e.filterable_data[0][1] for e in got)
            setup["dups"] = setup.get("dups", 0) + consumer.duplicates
        except SiftbusError:
            setup["dups"] = setup.get("dups", 0) + consumer.duplicates
            setup["last"] = consumer.last_seq
            setup["odd_last"] = odd.last_seq
            setup["killed"] = True
        return setup
    finally:
        await client.close()


@pytest.mark.timeout(120)
def test_sigkill_and_restart_delivers_everything_once_in_order(tmp_path: Path) -> None:
    store, port_file = tmp_path / "channels.db", tmp_path / "port"
    accepted: list[int] = []
    received: list[int] = []
    proc, port = start_server(store, port_file)
    try:
        setup = asyncio.run(_phase(port, None, 0, 400, accepted, received, 150, proc))
        assert setup.get("killed") and 150 <= len(accepted) < 400
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    proc, port = start_server(store, port_file)
    try:
        setup = asyncio.run(_phase(port, setup, 1000, 100, accepted, received, None, None))
        assert not setup.get("killed")
    finally:
        stop_server(proc)
    assert received == accepted  # every accepted event, once, in order
    assert setup["dups"] <= 50  # only the unacknowledged pull window came again
    assert setup["odd_got"] == [i for i in accepted if i % 2 == 1]


def test_in_process_restart_keeps_objects_filters_and_events(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with EventChannelFactory(db, dispatch=False) as f:
        ch, cid = f.create_channel(PERSISTENT, {Q.MAX_CONSUMERS: 5})
        ca, aid = ch.new_for_consumers(Q.OR_OP)
        pull, pid = ca.obtain_notification_pull_supplier("STRUCTURED_EVENT")
        pull.connect_structured_pull_consumer()
        flt = f.filter_factory.create_filter()
        flt.add_constraints([([("d", "*")], "$i > 1")])
        pull.add_filter(flt)
        ca.add_filter(f.filter_factory.create_filter())  # empty filter: matches nothing
        sup, sid = ch.default_supplier_admin.obtain_notification_push_consumer(
            "STRUCTURED_EVENT")
        sup.connect_structured_push_supplier()
        sup.push_structured_event(ev(1))
        sup.push_structured_event(ev(2))
        sup.push_structured_event(ev(3))
        assert pull.try_pull_structured_event()[0].event_name == "e2"  # acked: gone
        f.create_channel()  # best effort: not stored
    with EventChannelFactory(db, dispatch=False) as f:
        assert f.get_all_channels() == [cid]  # only the persistent channel
        ch = f.get_event_channel(cid)
        assert ch.get_admin()[Q.MAX_CONSUMERS] == 5
        ca = ch.get_consumeradmin(aid)
        assert ca.MyOperator == Q.OR_OP
        pull = ca.get_proxy_supplier(pid)
        assert pull.connected  # a nil-client proxy comes back connected
        assert [pull.get_filter(i).get_all_constraints()[0].constraint_expression
                .constraint_expr for i in pull.get_all_filters()] == ["$i > 1"]
        assert pull.try_pull_structured_event()[0].event_name == "e3"
        assert pull.try_pull_structured_event() == (None, False)
        sup = ch.default_supplier_admin.get_proxy_consumer(sid)
        sup.push_structured_event(ev(4))
        sup.push_structured_event(ev(0))
        assert [pull.try_pull_structured_event()[0].event_name] == ["e4"]
        assert f.store is not None and f.store.event_count() == 0
    assert os.path.exists(db)


# Issue 13: the first pull after a restart ignored its acknowledgement (the restored
# in-flight window was not acknowledged, so events 1-4 came again instead of 5-8).


def _names(items: list[list[Any]]) -> list[str]:
    return [w["structured"]["header"]["fixed_header"]["event_name"] for _, w in items]


def test_first_pull_after_a_restart_honours_its_acknowledgement(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with EventChannelFactory(db, dispatch=False) as f:
        service = ChannelService(f)
        cid = service("create_channel", {"qos": PERSISTENT})
        pid = service("obtain_consumer", {"channel": cid})
        sid = service("obtain_supplier", {"channel": cid})
        service("push", {"channel": cid, "proxy": sid,
                         "events": [ev(i).to_dict() for i in range(1, 11)]})
        first = service("pull", {"channel": cid, "proxy": pid, "max": 4})
        assert _names(first) == ["e1", "e2", "e3", "e4"]
    with EventChannelFactory(db, dispatch=False) as f:  # the restart
        service = ChannelService(f)
        got = service("pull", {"channel": cid, "proxy": pid, "max": 4, "ack": first[-1][0]})
        assert _names(got) == ["e5", "e6", "e7", "e8"]
        # without an acknowledgement the same (unacknowledged) window comes again
        again = service("pull", {"channel": cid, "proxy": pid, "max": 4})
        assert again == got
        rest = service("pull", {"channel": cid, "proxy": pid, "max": 4, "ack": got[-1][0]})
        assert _names(rest) == ["e9", "e10"]
        service("pull", {"channel": cid, "proxy": pid, "max": 4, "ack": rest[-1][0]})
        assert f.store is not None and f.store.event_count() == 0


def test_first_pull_after_a_server_restart_over_the_wire(tmp_path: Path) -> None:
    store, port_file = tmp_path / "channels.db", tmp_path / "port"

    async def before(port: int) -> tuple[int, int, int]:
        async with await ChannelClient.connect("127.0.0.1", port) as client:
            cid = await client.call("create_channel", qos=PERSISTENT)
            consumer = await RemoteConsumer.obtain(client, cid)
            supplier = await RemoteSupplier.obtain(client, cid)
            await supplier.push([ev(i) for i in range(1, 11)])
            got = await consumer.pull(4, timeout=0)
            assert [e.event_name for e in got] == ["e1", "e2", "e3", "e4"]
            return cid, consumer.proxy, consumer.last_seq

    async def after(port: int, cid: int, pid: int, last: int) -> list[str]:
        async with await ChannelClient.connect("127.0.0.1", port) as client:
            consumer = RemoteConsumer(client, cid, pid)
            consumer.last_seq = last
            got = await consumer.pull(4, timeout=0)
            assert consumer.duplicates == 0  # nothing acknowledged came again
            return [e.event_name for e in got]

    proc, port = start_server(store, port_file)
    try:
        cid, pid, last = asyncio.run(before(port))
    finally:
        assert stop_server(proc) == 0  # SIGTERM stops it gracefully (store closed)
    proc, port = start_server(store, port_file)
    try:
        assert asyncio.run(after(port, cid, pid, last)) == ["e5", "e6", "e7", "e8"]
    finally:
        stop_server(proc)
