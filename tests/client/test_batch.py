"""The client's batch consumer API (``batch_callback``, :class:`NotificationBatch`) against
real broker servers on 127.0.0.1: the same (profile, event) sequence as the
per-notification API and as the reference prediction, mixed event types, mixed consumers
on one client, unsubscribing mid-stream."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.servers import close_all, settle, start_network
from broker_strategies import SCHEMA, events, profiles
from siftbus.broker.server import BrokerServer
from siftbus.client import Client, Notification, NotificationBatch
from siftbus.model import Event, Profile

T, U = SCHEMA["T"], SCHEMA["U"]

Row = tuple[str, str, int, tuple[Any, ...]]
"""(profile, src, seq, event keys) of one notification."""


def row(n: Notification) -> Row:
    return (n.profile, n.src, n.seq, n.event.keys)


def expected(subscribed: list[Profile], published: list[tuple[str, int, Event]]) -> list[Row]:
    """The reference prediction in delivery order: publication order, and within an
    event the matching ids sorted by code point."""
    out = []
    for src, seq, ev in published:
        for pid in sorted(p.id for p in subscribed if p.matches(ev)):
            out.append((pid, src, seq, ev.keys))
    return out


def check_batch(b: NotificationBatch) -> list[Row]:
    """The batch's invariants; returns its notifications as rows."""
    rows = [row(n) for n in b]
    assert len(b) == len(rows) > 0
    evs = b.to_events()
    assert len(evs) == b.n_events
    distinct: list[Row] = []
    for r in rows:  # rows of one event are adjacent
        if not distinct or distinct[-1][1:] != r[1:]:
            distinct.append(r)
    assert [e.keys for e in evs] == [r[3] for r in distinct]
    assert Counter(b.ids()) == Counter(r[0] for r in rows)
    assert len(b.stamps()) == len(b)
    for nb in b.blocks:
        assert len(nb.counts) == len(nb.seq) == len(nb.keys) == len(nb.ts)
        assert int(nb.counts.min()) > 0 and int(nb.counts.sum()) == len(nb.ids)
        assert list(nb.offsets[1:] - nb.offsets[:-1]) == nb.counts.tolist()
        assert len(nb.rows()) == len(nb.ids)
        for a in (nb.keys, nb.seq, nb.ts, nb.counts):
            assert not a.flags.writeable
        with pytest.raises(ValueError):
            nb.seq[0] = 1
    return rows


class Recorder:
    """A batch consumer that keeps every batch's rows (checked) in arrival order."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.batches = 0

    def __call__(self, b: NotificationBatch) -> None:
        self.batches += 1
        self.rows += check_batch(b)


MODES = ["batch", "batch2", "queue", "callback"]


async def run_case(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 3), label="brokers")
    names = [f"B{i}" for i in range(n)]
    servers = await start_network(names, [(names[i - 1], names[i]) for i in range(1, n)],
                                  "forwarding", "covering")
    clients: list[Client] = []
    try:
        port = servers[names[-1]].port
        each = await Client.connect(port=port, name="each")
        whole = await Client.connect(port=port, name="whole")
        mixed = await Client.connect(port=port, name="mixed")
        pub = await Client.connect(port=servers[names[0]].port, name="pub")
        clients += [each, whole, mixed, pub]
        ps = [data.draw(profiles(f"p{j}")) for j in range(data.draw(st.integers(1, 8)))]
        got_each: list[Row] = []
        await each.subscribe_many(ps, lambda n: got_each.append(row(n)))
        rec = Recorder()
        await whole.subscribe_many(ps, batch_callback=rec)
        modes = {p.id: data.draw(st.sampled_from(MODES), label=p.id) for p in ps}
        got_mixed: dict[str, list[Row]] = {m: [] for m in MODES}
        rec1, rec2 = Recorder(), Recorder()
        for p in ps:
            m = modes[p.id]
            if m == "callback":
                await mixed.subscribe(p, lambda n: got_mixed["callback"].append(row(n)))
            else:
                await mixed.subscribe(p, batch_callback={"batch": rec1, "batch2": rec2}.get(m))
        await settle(servers, clients)
        published: list[tuple[str, int, Event]] = []
        src = f"{names[0]}/pub"
        for _ in range(data.draw(st.integers(1, 4))):
            evs = data.draw(st.lists(events(), max_size=30))
            if data.draw(st.booleans()):
                await pub.flush()  # events buffered by publish() take their numbers first
                seq0 = pub._seq
                await pub.publish_batch(evs, ack=True)
                published += [(src, seq0 + i, e) for i, e in enumerate(evs)]
            else:  # one at a time: events of one loop turn share a frame
                for e in evs:
                    published.append((src, await pub.publish(e), e))
        await pub.ping()
        await settle(servers, clients)
        want = expected(ps, published)
        assert got_each == want
        assert rec.rows == want
        assert rec.batches <= len(published)
        for m, r in (("batch", rec1), ("batch2", rec2)):
            got_mixed[m] = r.rows
        for s in mixed.subscriptions.values():
            if modes[s.id] == "queue":  # each queue holds its profile's stream in order
                q = [row(s.queue.get_nowait()) for _ in range(s.queue.qsize())]
                assert q == [w for w in want if w[0] == s.id]
        for m in ("batch", "batch2", "callback"):
            assert got_mixed[m] == [w for w in want if modes[w[0]] == m], m
        counts = Counter(w[0] for w in want)
        for c in (each, whole, mixed):
            assert {s.id: s.received for s in c.subscriptions.values()} == \
                {p.id: counts[p.id] for p in ps}
            assert c.unclaimed.empty()
    finally:
        await close_all(servers, clients)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_batches_deliver_what_the_per_notification_api_and_the_oracle_do(
        data: st.DataObject) -> None:
    asyncio.run(run_case(data))


@pytest.fixture
async def broker() -> Any:
    servers = await start_network(["B1"], [], "forwarding")
    yield servers["B1"]
    await servers["B1"].close()


async def test_mixed_types_in_one_frame_come_in_publication_order(
        broker: BrokerServer) -> None:
    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port, name="pub") as pub:
        batches: list[NotificationBatch] = []
        await sub.subscribe_many(["p1: T(a <= 3)", "p2: T(a >= 2)", "p3: U(x = 1)"],
                                 batch_callback=batches.append)
        evs = [Event(T, (a, 0, "w")) for a in range(5)] + [Event(U, (1,)), Event(U, (2,))]
        evs += [Event(T, (3, 1, "v")), Event(U, (1,))]
        await pub.publish_batch(evs, ack=True)
        await sub.ping()
        (b,) = batches
        assert sorted(nb.etype.name for nb in b.blocks) == ["T", "U"]
        t = next(nb for nb in b.blocks if nb.etype.name == "T")
        assert t.keys.dtype == object and t.seq.tolist() == [0, 1, 2, 3, 4, 7]
        assert t.counts.tolist() == [1, 1, 2, 2, 1, 2] and t.src == "B1/pub"
        assert [(n.profile, n.seq) for n in b] == [
            ("p1", 0), ("p1", 1), ("p1", 2), ("p2", 2), ("p1", 3), ("p2", 3), ("p2", 4),
            ("p3", 5), ("p1", 7), ("p2", 7), ("p3", 8)]
        assert [e.keys for e in b.to_events()] == [evs[i].keys for i in (0, 1, 2, 3, 4, 5,
                                                                          7, 8)]
        assert np.all(b.stamps() > 0) and b.n_events == 8 and len(b) == 11


async def test_unsubscribe_mid_stream(broker: BrokerServer) -> None:
    """Unsubscribing while frames are in flight: the removed profile gets a prefix of its
    stream and nothing after the ACK; the others get everything, in order."""
    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port, name="pub") as pub:
        rec = Recorder()
        stop_at: list[int] = []
        await sub.subscribe_many(["a: T(a <= 5)", "b: T(b = HI)", "c: U(x >= 1)"],
                                 batch_callback=rec)
        evs = [Event(T, (i % 8, i % 3, "s")) if i % 4 else Event(U, (i % 4,))
               for i in range(3000)]
        publisher = asyncio.ensure_future(_publish_in_frames(pub, evs, 100))
        while len(rec.rows) < 500:
            await asyncio.sleep(0.001)
        await sub.unsubscribe("b")
        stop_at.append(len(rec.rows))
        await publisher
        await pub.ping()
        await sub.ping()
        ps = [sub.profile(t) for t in ["a: T(a <= 5)", "b: T(b = HI)", "c: U(x >= 1)"]]
        want = expected(ps, [("B1/pub", i, e) for i, e in enumerate(evs)])
        got_b = [r for r in rec.rows if r[0] == "b"]
        want_b = [w for w in want if w[0] == "b"]
        assert 0 < len(got_b) < len(want_b) and got_b == want_b[:len(got_b)]
        assert all(r[0] != "b" for r in rec.rows[stop_at[0]:])
        assert [r for r in rec.rows if r[0] != "b"] == [w for w in want if w[0] != "b"]
        assert sub.unclaimed.empty() and "b" not in sub.subscriptions
        assert sub._batch_subs == 2


async def _publish_in_frames(pub: Client, evs: list[Event], size: int) -> None:
    for i in range(0, len(evs), size):
        await pub.publish_batch(evs[i:i + size])
        await asyncio.sleep(0.002)


async def test_coroutine_batch_callback_and_argument_errors(broker: BrokerServer) -> None:
    async with await Client.connect(port=broker.port, name="sub") as sub, \
            await Client.connect(port=broker.port, name="pub") as pub:
        seen: list[int] = []

        async def on(b: NotificationBatch) -> None:
            await asyncio.sleep(0)
            seen.append(len(b))

        with pytest.raises(ValueError, match="not both"):
            await sub.subscribe("T(a = 1)", print, batch_callback=on)
        assert not sub.subscriptions
        await sub.subscribe("T(a = 1)", batch_callback=on)
        await pub.publish_batch([Event(T, (1, 0, "")), Event(T, (2, 0, ""))], ack=True)
        await sub.ping()
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert seen == [1]

