"""Delivering a NOTIFY frame's rows (a mixin of :class:`~siftbus.client.aio.Client`):
each session number once, then one :class:`~siftbus.client.notifications.Notification`
per row and profile id to its subscription's queue or callback (else to ``unclaimed``),
in publication order, or whole :class:`~siftbus.client.notifications.NotificationBatch`
objects to the subscriptions that take batches.

Separate from :mod:`.aio` because it is the client's hot path, with its own concern (the
fan-out of a columnar frame to subscriptions); the client reads frames, answers requests
and calls in here for notifications.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from siftbus.model import Schema
from siftbus.wire.events import Block, decode_batch, in_order

from .notifications import Notification, NotificationBatch, NotifyBlock, notify_block
from .session import SessionState
from .subscription import BatchCallback, Callback, Subscription


class _Client(Protocol):
    """What the mixin needs of its client."""

    schema: Schema | None
    session: SessionState | None
    subscriptions: dict[str, Subscription]
    _batch_subs: int
    unclaimed: asyncio.Queue[Notification]
    unclaimed_dropped: int
    unclaimed_callback: Callback | None

    def run_callback(self, fn: Callable[[Any], Any], arg: Any) -> None: ...

    def ack_nowait(self, upto: int | None = None) -> int: ...

    def _dispatch_each(self, blocks: list[tuple[Block, np.ndarray, list[str]]],
                       skip: set[str] | None) -> None: ...

    def _dispatch_batches(self, blocks: list[tuple[Block, np.ndarray, list[str]]]
                          ) -> None: ...


class Delivering:
    """Notification delivery (a mixin of ``Client``)."""

    def _notify(self: _Client, body: dict[str, Any]) -> None:
        """A NOTIFY frame: its rows to the subscriptions (each session number once)."""
        assert self.schema is not None
        blocks = decode_batch(body, self.schema, notify=True)
        if self.session is not None:
            blocks = self.session.accept(body, blocks)  # each number once
        if self._batch_subs:
            self._dispatch_batches(blocks)
        else:
            self._dispatch_each(blocks, None)
        if self.session is not None and self.session.auto_ack:
            self.ack_nowait()

    def _dispatch_each(self: _Client, blocks: list[tuple[Block, np.ndarray, list[str]]],
                       skip: set[str] | None) -> None:
        """One :class:`Notification` per (event, id) not in ``skip``, in publication
        order, to its subscription's queue or callback (else to :attr:`unclaimed`)."""
        subs = self.subscriptions
        numbers = self.session.numbers if self.session is not None else {}
        for ev, src, seq, ts, pids in in_order(blocks):
            number = numbers.get((src, seq), 0)
            for pid in pids:
                if skip is not None and pid in skip:
                    continue
                n = Notification(pid, ev, src, seq, ts, number)
                sub = subs.get(pid)
                if sub is not None:
                    sub.deliver(n)
                elif self.unclaimed_callback is not None:
                    self.run_callback(self.unclaimed_callback, n)
                else:
                    try:
                        self.unclaimed.put_nowait(n)
                    except asyncio.QueueFull:
                        self.unclaimed_dropped += 1

    def _dispatch_batches(self: _Client, blocks: list[tuple[Block, np.ndarray, list[str]]]
                          ) -> None:
        """Hand a frame to its batch callbacks (one :class:`NotificationBatch` each) and
        the rest of its notifications to the per-notification path.

        The work per notification is C-level (counting ids, filtering arrays); Python
        runs once per distinct profile id of the frame, not once per notification.
        """
        subs = self.subscriptions
        groups: dict[BatchCallback, set[str]] = {}
        batched: set[str] = set()
        single = True  # every id goes to one batch callback
        for pid, k in Counter(itertools.chain.from_iterable(b[2] for b in blocks)).items():
            sub = subs.get(pid)
            cb = sub.batch_callback if sub is not None else None
            if cb is None:
                single = False
                continue
            sub.received += k  # type: ignore[union-attr]
            batched.add(pid)
            groups.setdefault(cb, set()).add(pid)
        if len(groups) > 1:
            single = False
        if not single:
            self._dispatch_each(blocks, batched)
        for cb, ids in groups.items():
            out: list[NotifyBlock] = []
            for block, counts, pids in blocks:
                keep = (np.ones(len(pids), bool) if single else
                        np.fromiter((p in ids for p in pids), bool, len(pids)))
                nb = notify_block(block, counts, pids)._filtered(keep)
                if nb is not None:
                    out.append(nb)
            if out:
                self.run_callback(cb, NotificationBatch(tuple(out)))


__all__ = ["Delivering"]
