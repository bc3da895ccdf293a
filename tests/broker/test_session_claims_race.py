"""Two claims of one session epoch (issue 30 item 2): two processes reconnect with the
same state at two brokers while the holder has not yet answered either handoff (its
handoff messages are held back, like a slow link). Both brokers claimed the same epoch;
the second was told "not here", started empty, and the rows each broker received went
to its own client only: neither process was told that the other took over, and rows
published meanwhile were split between them (the batch lost at one reconnected session
that ``bench/session_races.py`` found on slow links)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from siftbus.client import Client
from siftbus.client.session import SessionState
from siftbus.model import Event
from siftbus.wire.frames import MsgType

from .mobility import T, close_all, start_tree, wait_for


async def test_two_claims_of_one_epoch_during_a_handoff_lose_no_row() -> None:
    servers = await start_tree("acyclic", names=["B0", "B1", "B2"],
                               edges=[("B0", "B1"), ("B0", "B2")])
    clients: list[Client] = []
    try:
        got: dict[str, list[int]] = {"x": [], "y": []}
        state = SessionState("m")
        first = await Client.connect(port=servers["B0"].port, session=state)
        await first.subscribe("f: T()")
        pub = await Client.connect(port=servers["B0"].port)
        clients.append(pub)
        await asyncio.sleep(0.2)
        await pub.publish_batch([Event(T, (1, 1))], ack=True)
        await wait_for(lambda: state.last == 1, 5)
        await first.close()

        node = servers["B0"].node
        held: list[tuple[str, Any]] = []
        handle = node.handle

        def gated(link: str, msg: Any) -> None:
            # the holder reads both claimants' handoff requests only later
            if msg.type is MsgType.HANDOFF and msg.body.get("k") in ("move", "req"):
                held.append((link, msg))
                return
            handle(link, msg)

        node.handle = gated  # type: ignore[method-assign]
        twin = copy.deepcopy(state)  # a second process with the same state
        x = await Client.connect(port=servers["B1"].port, session=state, reconnect=False)
        x.unclaimed_callback = lambda n: got["x"].append(n.event.keys[1])
        clients.append(x)
        y = await Client.connect(port=servers["B2"].port, session=twin, reconnect=False)
        y.unclaimed_callback = lambda n: got["y"].append(n.event.keys[1])
        clients.append(y)
        await wait_for(lambda: len(held) >= 2, 5)
        await pub.publish_batch([Event(T, (1, b)) for b in (2, 3)], ack=True)
        node.handle = handle  # type: ignore[method-assign]
        for link, msg in held:
            handle(link, msg)
        await pub.publish_batch([Event(T, (1, b)) for b in (4, 5)], ack=True)
        await asyncio.sleep(0.3)
        await pub.publish_batch([Event(T, (1, b)) for b in (6, 7)], ack=True)

        # one process at a time: one of them is told the other took over, and the
        # other has every row published after the first
        await wait_for(lambda: x.ended.is_set() or y.ended.is_set(), 5)
        live, name = (y, "y") if x.ended.is_set() else (x, "x")
        assert not live.ended.is_set()
        await wait_for(lambda: sorted(set(got[name])) == [2, 3, 4, 5, 6, 7], 5)
    finally:
        await close_all(servers, clients)
