"""A blocking wrapper around the asyncio :class:`~siftbus.client.aio.Client`.

The asyncio client runs on an event loop in a background thread; every method blocks
until its coroutine finishes there. Notifications are collected in a thread-safe queue
(:meth:`SyncClient.receive`) unless a callback is given, which then runs in the loop
thread.

Sessions (``docs/mobility.md``) work as with the asyncio client: ``connect(...,
session=...)`` resumes after the last acknowledged number, :meth:`SyncClient.move` goes
to another broker with the session, and rows resumed for profiles this process has not
subscribed again (a fresh process with only the session id) come to :meth:`receive`.
"""

from __future__ import annotations

import asyncio
import queue
import ssl
import threading
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from siftbus.model import Event, Profile, Schema

from .aio import BatchCallback, Callback, Client, Notification
from .session import SessionState

T = TypeVar("T")


class SyncClient:
    """A blocking client: ``with SyncClient.connect(host, port) as c: c.publish(...)``."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="siftbus-client")
        self._thread.start()
        self._client: Client | None = None
        self._inbox: queue.Queue[Notification] = queue.Queue()

    @classmethod
    def connect(cls, host: str = "127.0.0.1", port: int = 7400, *, name: str | None = None,
                timeout: float = 60.0, token: str | None = None,
                tls: ssl.SSLContext | None = None,
                session: str | SessionState | None = None) -> SyncClient:
        """Connect (arguments as :meth:`Client.connect <siftbus.client.aio.Client.connect>`;
        with ``session``, an id or a :class:`~siftbus.client.session.SessionState`)."""
        c = cls(timeout)
        try:
            c._client = c._run(Client.connect(host, port, name=name, timeout=timeout,
                                              token=token, tls=tls, session=session))
            if session is not None:
                c._run(c._claim_resumed())
        except BaseException:
            c._stop()
            raise
        return c

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
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout)

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
                  id: str | None = None, batch_callback: BatchCallback | None = None) -> str:
        """Subscribe; notifications go to ``callback``, or once per frame as a
        ``NotificationBatch`` to ``batch_callback`` (both run in the client's loop thread),
        or else to :meth:`receive`. Returns the id."""
        if batch_callback is not None:
            sub = self._run(self.client.subscribe(profile, callback, id=id,
                                                  batch_callback=batch_callback))
        else:
            sub = self._run(self.client.subscribe(profile, callback or self._inbox.put, id=id))
        return sub.id

    def unsubscribe(self, *ids: str) -> None:
        self._run(self.client.unsubscribe(*ids))

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
        """The next notification; ``queue.Empty`` after ``timeout`` seconds."""
        return self._inbox.get(timeout=timeout)

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


__all__ = ["SyncClient"]
