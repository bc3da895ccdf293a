"""The client's side of a session (``docs/mobility.md``).

A :class:`SessionState` travels with a :class:`~siftbus.client.aio.Client` across its
connections (reconnects, :meth:`~siftbus.client.aio.Client.move` to another broker). It
knows the session's id, the last session number handed to the application (``last``:
what the client acknowledges and resumes from), the broker's latest status (overflow,
rows lost over a limit) and the numbers it skipped. Rows numbered at or below ``last``
(resent after a reconnect) are dropped here, so the application sees each row once.

Exactly once across a crash of the client needs ``last`` stored with the application's
own output: give the number back to :class:`SessionState` when the process starts again
(``siftbus subscribe --session ID --out FILE`` keeps it in FILE's lines).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from siftbus.broker.sessions import keep_rows
from siftbus.errors import ConfigError, WireError
from siftbus.model import Profile
from siftbus.wire.events import Block
from siftbus.wire.profiles import encode_profile

Rows = list[tuple[Block, np.ndarray, list[str]]]


class SessionState:
    """One session as its client sees it."""

    def __init__(self, sid: str, *, last: int = 0, clean: bool = False,
                 limits: Mapping[str, Any] | None = None, auto_ack: bool = True) -> None:
        if not isinstance(sid, str) or not sid:
            raise ConfigError("a session id must be a non-empty name", field="session")
        self.id = sid
        self.last = last
        """The highest session number handed to the application."""
        self.clean = clean
        self.limits = dict(limits or {})
        self.auto_ack = auto_ack
        """Acknowledge each frame once it is dispatched (else call ``Client.ack``)."""
        self.epoch = 0
        self.tag = 0
        self.status: dict[str, Any] = {}
        """The broker's latest status of the session (``state``, ``overflow``, ``lost``,
        ``buffered``...)."""
        self.statuses: list[dict[str, Any]] = []
        self.gaps: list[tuple[int, int]] = []
        """Numbers skipped: rows the broker dropped over a limit (also in ``status``)."""
        self.redelivered = 0
        """Rows received again with a number already handed out (dropped)."""
        self.profiles: dict[str, list[Any]] = {}
        """The session's profiles by id (wire form): those subscribed through it and those
        the broker reported kept (a reconnect, a fresh process). A move names them all,
        so the new broker takes every one over."""
        self.numbers: dict[tuple[str, int], int] = {}
        """The session number of each publication ``(src, seq)`` of the frame being
        dispatched (for callbacks that store it with their output)."""

    def subscribed(self, profiles: list[Profile]) -> None:
        for p in profiles:
            self.profiles[p.id] = encode_profile(p)

    def unsubscribed(self, ids: list[str]) -> None:
        for pid in ids:
            self.profiles.pop(pid, None)

    def hello(self, previous: str | None, profiles: list[Profile],
              adverts: list[Profile]) -> dict[str, Any]:
        """The HELLO's ``session`` map (``previous``: the broker it was attached to;
        ``profiles``: those the client holds, kept with the session's others)."""
        self.subscribed(profiles)
        body: dict[str, Any] = {"id": self.id, "ack": self.last, "clean": self.clean}
        self.clean = False  # once: a reconnect resumes
        if self.limits:
            body["limits"] = self.limits
        if self.epoch:
            body.update(epoch=self.epoch, tag=self.tag)
        if previous:
            body.update({"from": previous,
                         "profiles": list(self.profiles.values())})
        if adverts:
            body["adverts"] = [encode_profile(p) for p in adverts]
        return body

    def on_status(self, status: Any) -> None:
        """The broker's status (in the HELLO's ACK, or pushed when a handoff ends)."""
        if not isinstance(status, dict):
            raise WireError("session status must be a map", field="session")
        profiles = status.get("profiles")
        if isinstance(profiles, list):  # the broker's account of them is the truth
            self.profiles = {str(p[0]): p for p in profiles
                             if isinstance(p, list) and p}
        self.status = status
        self.statuses.append(status)
        self.epoch = int(status.get("epoch", self.epoch))
        self.tag = int(status.get("tag", self.tag))

    def accept(self, body: dict[str, Any], blocks: Rows) -> Rows:
        """The rows of a NOTIFY not handed out yet (numbers in each block's ``ss``)."""
        raw = body.get("blocks", [])
        out: Rows = []
        self.numbers = {}
        for d, (block, counts, pids) in zip(raw, blocks, strict=True):
            first = d.get("ss") if isinstance(d, dict) else None
            if not isinstance(first, int):
                out.append((block, counts, pids))  # not a session row
                continue
            nums = np.arange(first, first + len(block), dtype=np.int64)
            keep = nums > self.last
            self.redelivered += int((~keep).sum())
            kept = keep_rows(block, counts, pids, keep)
            if kept is None:
                continue
            fresh = nums[keep]
            if int(fresh[0]) > self.last + 1:
                self.gaps.append((self.last + 1, int(fresh[0]) - 1))
            steps = np.flatnonzero(np.diff(fresh) > 1)
            for i in steps.tolist():
                self.gaps.append((int(fresh[i]) + 1, int(fresh[i + 1]) - 1))
            self.last = int(fresh[-1])
            srcs = kept[0].srcs()
            for src, seq, n in zip(srcs, kept[0].seq.tolist(), fresh.tolist(), strict=True):
                self.numbers[(src, seq)] = n
            out.append(kept)
        return out


__all__ = ["SessionState"]
