"""Stopping a server process on SIGTERM or SIGINT, whatever its event loop is doing.

``loop.add_signal_handler`` runs its callback only when the event loop gets control
back: a server busy with one long request would ignore SIGTERM until it finished. Here
the signal's handler (Python runs it between two bytecodes of the main thread, also in
the middle of a request) asks the loop to stop gracefully and starts a timer thread that
ends the process if it is still running ``grace`` seconds later; a second signal ends
it at once. What a broker acknowledged is safe at that point: its store commits each
request's transaction before the ACK. Requests themselves are bounded by the server's
:class:`~siftbus.wire.limits.Limits`, so no single call into C code holds the
interpreter for long.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _exit_now(name: str, why: str, status: int) -> None:
    os.write(2, f"siftbus: {name} stopped at once ({why})\n".encode())
    os._exit(status)


def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None], *,
                    grace: float = 10.0, name: str = "server") -> None:
    """Call ``stop()`` in ``loop`` on the first SIGINT/SIGTERM; exit the process with
    status 128 + signal number on a second one, or ``grace`` seconds after the first if
    it has not ended by then. Call it from the main thread."""
    signals_seen: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals_seen.append(signum)
        sig = signal.Signals(signum).name
        if len(signals_seen) > 1:
            _exit_now(name, f"a second {sig}", 128 + signum)
        timer = threading.Timer(grace, _exit_now,
                                (name, f"{grace:g}s after {sig}", 128 + signum))
        timer.daemon = True
        timer.start()
        loop.call_soon_threadsafe(stop)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)


__all__ = ["STOP_SIGNALS", "stop_on_signals"]
