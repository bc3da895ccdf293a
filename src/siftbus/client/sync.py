"""A blocking wrapper around the asyncio :class:`~siftbus.client.aio.Client`.

The asyncio client runs on an event loop in a background thread; every method blocks
until its coroutine finishes there. Notifications are collected in a thread-safe queue
(:meth:`SyncClient.receive`) unless a callback is given, which then runs in the loop
thread.
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
                tls: ssl.SSLContext | None = None) -> SyncClient:
        """Connect (arguments as :meth:`Client.connect <siftbus.client.aio.Client.connect>`)."""
        c = cls(timeout)
        try:
            c._client = c._run(Client.connect(host, port, name=name, timeout=timeout,
                                              token=token, tls=tls))
        except BaseException:
            c._stop()
            raise
        return c

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
