"""A blocking wrapper around the asyncio :class:`~siftbus.client.aio.Client`, with the
same shape: ``subscribe`` returns a subscription with ``get(timeout)`` and iteration.

The asyncio client runs on an event loop in a background thread; every method blocks
until its coroutine finishes there. Notifications wait in the client's inbox, per
profile, unless a callback is given (which then runs in the loop thread):
``sub.get()`` takes the next of one subscription, :meth:`SyncClient.receive` the next of
any. Reconnection after a broker restart is the asyncio client's (on by default).

Sessions (``docs/mobility.md``) work as with the asyncio client: ``connect(...,
session=...)`` resumes after the last acknowledged number, :meth:`SyncClient.move` goes
to another broker with the session, and rows resumed for profiles this process has not
subscribed again (a fresh process with only the session id) come to :meth:`receive`.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from siftbus.errors import ConnectionLostError, SiftbusError, TimedOut
from siftbus.model import Event, Profile, Schema

from .aio import BatchCallback, Callback, Client, Notification
from .reconnect import Reconnect
from .session import SessionState

T = TypeVar("T")


class ReceiveTimeout(TimedOut, queue.Empty):
    """Nothing came within the time given to ``get``/``receive`` (also a
    ``queue.Empty``, as ``receive`` raised before)."""


class _Inbox:
    """Notifications per profile id, in arrival order, for threads to take: the oldest
    of one profile, or the oldest of all."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._by_id: dict[str, deque[tuple[int, Notification]]] = {}
        self._order = itertools.count()
        self._end: SiftbusError | None = None

    def put(self, n: Notification) -> None:
        with self._cond:
            self._by_id.setdefault(n.profile, deque()).append((next(self._order), n))
            self._cond.notify_all()

    def end(self, why: SiftbusError) -> None:
        with self._cond:
            self._end = why
            self._cond.notify_all()

    def get(self, pid: str | None, timeout: float | None) -> Notification:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                got = self._take(pid)
                if got is not None:
                    return got
                if self._end is not None:
                    raise self._end
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ReceiveTimeout(f"no notification{f' for {pid!r}' if pid else ''} "
                                         f"within {timeout} s")
                self._cond.wait(left)

    def _take(self, pid: str | None) -> Notification | None:
        if pid is not None:
            q = self._by_id.get(pid)
            return q.popleft()[1] if q else None
        heads = [(q[0][0], k) for k, q in self._by_id.items() if q]
        return self._by_id[min(heads)[1]].popleft()[1] if heads else None


class SyncSubscription:
    """One profile of a :class:`SyncClient`: ``get(timeout)`` its next notification, or
    iterate (until the client ends)."""

    def __init__(self, client: SyncClient, pid: str, profile: Profile) -> None:
        self.client = client
        self.id = pid
        self.profile = profile

    def get(self, timeout: float | None = None) -> Notification:
        """The next notification; :class:`ReceiveTimeout` (a
        :class:`~siftbus.errors.TimedOut`) after ``timeout`` seconds,
        :class:`~siftbus.errors.ConnectionLostError` once the client has ended."""
        return self.client._inbox.get(self.id, timeout)

    def __iter__(self) -> Iterator[Notification]:
        while True:
            try:
                yield self.get()
            except ConnectionLostError:
                return

    def unsubscribe(self) -> None:
        self.client.unsubscribe(self.id)

    def __repr__(self) -> str:
        return f"SyncSubscription({self.id!r})"


class SyncClient:
    """A blocking client: ``with SyncClient.connect(host, port) as c: c.publish(...)``."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="siftbus-client")
        self._thread.start()
        self._client: Client | None = None
        self._inbox = _Inbox()

    @classmethod
    def connect(cls, host: str = "127.0.0.1", port: int = 7400, *, name: str | None = None,
                timeout: float = 60.0, token: str | None = None,
                tls: ssl.SSLContext | None = None,
                session: str | SessionState | None = None,
                servers: Sequence[str | tuple[str, int]] = (),
                reconnect: bool | Reconnect = True,
                on_disconnect: Callable[[Client], Any] | None = None,
                on_reconnect: Callable[[Client], Any] | None = None) -> SyncClient:
        """Connect (arguments as :meth:`Client.connect <siftbus.client.aio.Client.connect>`;
        with ``session``, an id or a :class:`~siftbus.client.session.SessionState`; the
        hooks run in the client's loop thread)."""
        c = cls(timeout)
        try:
            c._client = c._run(Client.connect(
                host, port, name=name, timeout=timeout, token=token, tls=tls,
                session=session, servers=servers, reconnect=reconnect,
                on_disconnect=on_disconnect, on_reconnect=on_reconnect))
            c._run(c._watch_end())
            if session is not None:
                c._run(c._claim_resumed())
        except BaseException:
            c._stop()
            raise
        return c

    async def _watch_end(self) -> None:
        client = self.client

        async def watch() -> None:
            await client.ended.wait()
            self._inbox.end(client.end_error)

        client._spawn(watch())

    async def _claim_resumed(self) -> None:
        """Resumed rows of profiles not subscribed in this process go to the inbox
        (in the loop thread: none can slip between the drain and the callback)."""
        client = self.client
        client.unclaimed_callback = self._inbox.put
        while not client.unclaimed.empty():
            self._inbox.put(client.unclaimed.get_nowait())

    @property
    def session(self) -> SessionState | None:
        """The session (``connect(session=...)``), else ``None``."""
        return self.client.session

    def move(self, host: str, port: int, *, timeout: float = 10.0,
             server_hostname: str | None = None) -> None:
        """Go to another broker with the same session (as :meth:`Client.move
        <siftbus.client.aio.Client.move>`: none of its notifications lost or twice)."""
        self._run(self.client.move(host, port, timeout=timeout,
                                   server_hostname=server_hostname))

    def ack(self, upto: int | None = None) -> int:
        """Acknowledge every session row handed out so far (with ``auto_ack=False``), or
        those up to ``upto``; returns once the broker has taken it."""
        return self._run(self.client.ack(upto))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise TimedOut(f"the broker call took longer than {self.timeout} s") from None

    @property
    def client(self) -> Client:
        assert self._client is not None, "not connected"
        return self._client

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def schema(self) -> Schema:
        assert self.client.schema is not None
        return self.client.schema

    def subscribe(self, profile: str | Profile, callback: Callback | None = None, *,
                  id: str | None = None, batch_callback: BatchCallback | None = None
                  ) -> SyncSubscription:
        """Subscribe; notifications go to ``callback``, or once per frame as a
        ``NotificationBatch`` to ``batch_callback`` (both run in the client's loop thread),
        or else to the returned subscription (``get``, iteration) and :meth:`receive`."""
        if batch_callback is not None:
            sub = self._run(self.client.subscribe(profile, callback, id=id,
                                                  batch_callback=batch_callback))
        else:
            sub = self._run(self.client.subscribe(profile, callback or self._inbox.put, id=id))
        return SyncSubscription(self, sub.id, sub.profile)

    def unsubscribe(self, *ids: str | SyncSubscription) -> None:
        self._run(self.client.unsubscribe(
            *(i.id if isinstance(i, SyncSubscription) else i for i in ids)))

    def publish(self, event: Event | Mapping[str, Any] | str) -> None:
        self._run(self.client.publish_batch([event]))

    def publish_batch(self, events: Iterable[Event | Mapping[str, Any] | str], *,
                      ack: bool = False) -> int:
        return self._run(self.client.publish_batch(list(events), ack=ack))

    def call(self, service: str, method: str, **args: Any) -> Any:
        return self._run(self.client.call(service, method, **args))

    def ping(self) -> None:
        self._run(self.client.ping())

    def receive(self, timeout: float | None = None) -> Notification:
        """The next notification of any subscription without a callback (and a resumed
        session's rows of profiles not subscribed in this process), in arrival order;
        :class:`ReceiveTimeout` (also a ``queue.Empty``) after ``timeout`` seconds."""
        return self._inbox.get(None, timeout)

    def close(self) -> None:
        if self._client is not None:
            try:
                self._run(self.client.close())
            finally:
                self._client = None
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ReceiveTimeout", "SyncClient", "SyncSubscription"]
