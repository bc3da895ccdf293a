"""An HTTP listener inside a server's own event loop: uvicorn serving an ASGI app.

Every siftbus server that speaks HTTP besides its frame protocol -- the scrape endpoint
of a broker or a channel server, the gateway -- runs its app through
:class:`EmbeddedHTTPServer`: uvicorn on a socket bound here (so a busy port is one
:class:`~siftbus.errors.EnvironmentProblem`, and port 0 gives a free port at once),
in the loop that already runs the server. So a metrics collector reads the server's
counters on the thread that changes them, and no second thread or process is needed.
uvicorn does not install signal handlers here: the host process keeps its own
(:mod:`siftbus.wire.signals`).

:func:`metrics_app` is the ``/metrics`` app of a Prometheus registry (the text
exposition format, ``prometheus_client.make_asgi_app``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Generator
from typing import Any, Literal

from siftbus.errors import EnvironmentProblem

log = logging.getLogger("siftbus.wire")

ASGIApp = Callable[..., Any]
"""An ASGI application (FastAPI, Starlette, prometheus_client's metrics app)."""


def _server_class() -> Any:
    import uvicorn  # lazily: servers without an HTTP listener never pay for it

    class _Quiet(uvicorn.Server):
        """uvicorn without its own signal handlers (the host process has them)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    return _Quiet


class EmbeddedHTTPServer:
    """Serve an ASGI ``app`` on ``host:port`` in the running event loop.

    ``limit_concurrency`` bounds connections and requests in progress (beyond it uvicorn
    answers 503); ``ssl_certfile``/``ssl_keyfile`` make it HTTPS; ``lifespan="on"``
    runs the app's start-up and shut-down handlers and fails when they fail (``"auto"``:
    for apps without them). ``name`` appears in error messages and logs.
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *,
                 name: str = "HTTP listener", limit_concurrency: int | None = 1000,
                 ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                 ws_max_size: int = 16 * 1024 * 1024, log_level: str = "warning",
                 lifespan: Literal["auto", "on", "off"] = "auto") -> None:
        self.app = app
        self.host = host
        self._port = port
        self.name = name
        self.limit_concurrency = limit_concurrency
        self.ssl_certfile = ssl_certfile
        self.ssl_keyfile = ssl_keyfile
        self.ws_max_size = ws_max_size
        self.log_level = log_level
        self.lifespan = lifespan
        self._sock: socket.socket | None = None
        self._bound: int | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (still known after :meth:`close`)."""
        assert self._bound is not None, "HTTP listener not started"
        return self._bound

    @property
    def url(self) -> str:
        """``http://host:port`` (``https`` with a certificate)."""
        scheme = "https" if self.ssl_certfile else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    async def start(self, timeout: float = 10.0) -> None:
        """Bind and start serving; returns once uvicorn accepts connections."""
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._port))
        except OSError as exc:
            sock.close()
            raise EnvironmentProblem(f"{self.name} cannot listen on {self.host}:"
                                     f"{self._port}: {exc.strerror or exc}") from None
        sock.set_inheritable(True)
        self._sock = sock
        self._bound = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self.app, log_level=self.log_level, access_log=False, lifespan=self.lifespan,
            limit_concurrency=self.limit_concurrency, ws_max_size=self.ws_max_size,
            ssl_certfile=self.ssl_certfile, ssl_keyfile=self.ssl_keyfile,
            timeout_graceful_shutdown=2, ws="websockets-sansio" if _has_sansio() else "auto")
        self._server = _server_class()(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._server.started:
            if self._task.done():
                try:
                    self._task.result()
                    why = "it stopped"
                except (Exception, SystemExit, asyncio.CancelledError) as exc:
                    why = repr(exc)  # uvicorn exits when the app's start-up fails
                sock.close()
                raise EnvironmentProblem(f"{self.name} did not start: {why}")
            if loop.time() > deadline:
                await self.close()
                raise EnvironmentProblem(f"{self.name} did not start within {timeout:g} s")
            await asyncio.sleep(0.005)

    async def close(self, timeout: float = 5.0) -> None:
        """Stop serving: close connections (after ``timeout`` seconds, by force)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except (TimeoutError, asyncio.CancelledError):
                self._server.force_exit = True
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
            except (Exception, SystemExit):  # uvicorn exits on some start-up failures
                log.exception("%s stopped with an error", self.name)
            self._task = None
        if self._sock is not None:
            self._sock.close()

    async def __aenter__(self) -> EmbeddedHTTPServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _has_sansio() -> bool:
    """Whether this uvicorn has the sans-I/O websockets protocol (not deprecated)."""
    try:
        from uvicorn.protocols.websockets import websockets_sansio_impl  # noqa: F401
    except ImportError:
        return False
    return True


def metrics_registry(collector: Any, *, process: bool = True) -> Any:
    """A fresh Prometheus registry holding ``collector`` and, with ``process``, the
    process's own ``process_*`` metrics (each server builds its own, never the global
    one, so that several servers in one process never clash)."""
    from prometheus_client import ProcessCollector
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(collector)
    if process:
        ProcessCollector(registry=registry)
    return registry


def metrics_app(registry: Any) -> ASGIApp:
    """The ASGI app serving ``registry`` in the Prometheus text format (any path)."""
    from prometheus_client import make_asgi_app

    return make_asgi_app(registry)


async def serve_metrics(registry: Any, host: str = "127.0.0.1", port: int = 0, *,
                        name: str = "metrics listener") -> EmbeddedHTTPServer:
    """Start an HTTP listener that serves ``registry`` at ``/metrics`` (any path)."""
    server = EmbeddedHTTPServer(metrics_app(registry), host, port, name=name,
                                limit_concurrency=64)
    await server.start()
    return server


__all__ = ["ASGIApp", "EmbeddedHTTPServer", "metrics_app", "metrics_registry", "serve_metrics"]
