"""Matching on every core: worker processes, sharded by message (thesis §5.4, B3).

The thesis ran N ``WorkingFilter`` threads, each with a private copy of the index. CPython
runs Python code on one core at a time, so siftbus runs N worker *processes*: they are
forked from the process that loaded the subscriptions, so each starts with the compiled
index in memory shared copy-on-write (the index is only read while matching; each worker
freezes its garbage collector so that collections do not touch, and copy, the inherited
objects). Messages are handed out in turn; each worker parses, cuts, matches and
serialises whole messages, and the results come back in the order the messages were
given. A subscription change is sent to every worker in the same stream as the messages,
so it applies to every message given after it, as in one process.

The parent's work per message is sending its bytes and receiving its notifications; the
workers' is everything else. With ``w`` the worker's CPU time per event and ``p`` the
parent's, ``n`` workers on ``n + 1`` free cores reach ``min(n / w, 1 / p)`` events per
second (``bench/xmlcores.py`` measures both).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from multiprocessing.connection import Connection
from typing import IO, Any

from siftbus.errors import EnvironmentProblem, SiftbusError
from siftbus.xmlfilter.engine import XmlEventFilter
from siftbus.xmlfilter.output import Notification
from siftbus.xmlfilter.subscription import Receiver, Subscription

#: messages in flight per worker. One: a worker is then always either reading (its next
#: message) or writing (its result), never both, so neither side can block the other on
#: a full pipe, whatever the sizes (with two, a large message and a large result meet)
IN_FLIGHT = 1

#: (event, targets, subscriptions, receivers as (method, address), xml) per notification
_Wire = tuple[int, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...], bytes]


def _worker(engine: XmlEventFilter, conn: Connection) -> None:
    """A worker's loop: messages and changes in, results out, until told to stop."""
    gc.freeze()  # the inherited index: no collection touches (and copies) its pages
    # locks are made afresh: another thread of the parent may have held one at the fork
    engine.matcher._lock = threading.Lock()
    engine.lifecycle._lock = threading.Lock()
    while True:
        try:
            item = conn.recv()
        except EOFError:
            return
        kind = item[0]
        if kind == "stop":
            return
        try:
            if kind == "msg":
                out: list[_Wire] = []
                events = 0
                for r in engine.iter_results(item[2], name=item[3]):
                    events += 1
                    for n in r.notifications:
                        out.append((n.event, n.targets, n.subscriptions,
                                    tuple((x.method, x.address) for x in n.receivers), n.xml))
                conn.send(("res", item[1], events, out))
            elif kind == "sub":
                engine.subscribe(item[1])
            elif kind == "unsub":
                engine.unsubscribe(item[1])
            elif kind == "type":
                engine.define_type(item[1], item[2], item[3])
            elif kind == "untype":
                engine.undefine_type(item[1])
        except SiftbusError as exc:
            if kind == "msg":
                conn.send(("err", item[1], exc))
            # a change the parent already applied cannot fail here (same index state)


class ParallelFilter:
    """``workers`` processes matching messages of one :class:`XmlEventFilter`.

    Use as a context manager (the workers stop at the end). Subscribe and unsubscribe
    through this object while it runs, so that the workers follow.
    """

    def __init__(self, engine: XmlEventFilter, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError("at least one worker")
        self.engine = engine
        self._ctx = mp.get_context("fork")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        engine.matcher.compile()  # compiled once, before the fork: shared by every worker
        for _ in range(workers):
            parent, child = self._ctx.Pipe()
            proc = self._ctx.Process(target=_worker, args=(engine, child), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)

    @property
    def workers(self) -> int:
        return len(self._procs)

    # -- changes (applied here and sent to every worker, in order with the messages) ----
    def subscribe(self, sub: Subscription) -> str:
        sid = self.engine.subscribe(sub)
        self._broadcast(("sub", sub))
        return sid

    def unsubscribe(self, sub_id: str) -> Subscription:
        sub = self.engine.unsubscribe(sub_id)
        self._broadcast(("unsub", sub_id))
        return sub

    def define_type(self, name: str, entries: Iterable[str],
                    namespaces: Mapping[str, str] | None = None) -> None:
        items = list(entries)
        ns = dict(namespaces or {})
        self.engine.define_type(name, items, ns)
        self._broadcast(("type", name, items, ns))

    def undefine_type(self, name: str) -> None:
        self.engine.undefine_type(name)
        self._broadcast(("untype", name))

    def _broadcast(self, item: tuple[Any, ...]) -> None:
        for c in self._conns:
            c.send(item)

    # -- matching -------------------------------------------------------------------------
    def publish_many(self, messages: Iterable[bytes | IO[bytes]], *, name: str | None = None
                     ) -> Iterator[tuple[int, list[Notification]]]:
        """``(located events, notifications)`` per message, in the order given; the
        messages are matched by the workers in turn, ``IN_FLIGHT`` at a time each. A bad
        message raises its error where its result would have come."""
        pending: deque[tuple[int, Connection]] = deque()
        seq = 0
        n = len(self._conns)
        it = iter(messages)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < IN_FLIGHT * n:
                    msg = next(it, None)
                    if msg is None:
                        exhausted = True
                        break
                    data = msg if isinstance(msg, bytes | bytearray) else msg.read()
                    conn = self._conns[seq % n]
                    conn.send(("msg", seq, bytes(data), name))
                    pending.append((seq, conn))
                    seq += 1
                if not pending:
                    return
                want, conn = pending.popleft()
                yield self._result(want, conn)
        finally:  # an error or a consumer that stops early: the answers still due are read
            for _, conn in pending:
                self._receive(conn)

    def _receive(self, conn: Connection) -> tuple[Any, ...]:
        try:
            return tuple(conn.recv())
        except (EOFError, OSError):
            raise EnvironmentProblem("an XML filter worker process ended") from None

    def _result(self, want: int, conn: Connection) -> tuple[int, list[Notification]]:
        kind, got, *rest = self._receive(conn)
        assert got == want, (got, want)  # each worker answers in order
        if kind == "err":
            raise rest[0]
        events, wire = rest
        return events, [Notification(e, t, s, tuple(Receiver(m, a) for m, a in r), x)
                        for e, t, s, r, x in wire]

    def close(self) -> None:
        """Stop the workers (waits for them; a worker that hangs is killed)."""
        for c in self._conns:
            with contextlib.suppress(BrokenPipeError, OSError):
                c.send(("stop",))
        for p in self._procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
        for c in self._conns:
            c.close()
        self._conns.clear()
        self._procs.clear()

    def __enter__(self) -> ParallelFilter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
