"""Stopping a server process on SIGTERM or SIGINT, whatever its event loop is doing.

``loop.add_signal_handler`` runs its callback only when the event loop gets control
back: a server busy with one long request would ignore SIGTERM until it finished. Here a
thread of its own waits for the signals (they are blocked in every other thread), asks
the loop to stop gracefully, and ends the process if it is still running ``grace``
seconds later or when a second signal comes. What a broker acknowledged is safe at that
point: its store commits each request's transaction before the ACK.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None], *,
                    grace: float = 10.0, name: str = "server") -> None:
    """Call ``stop()`` in ``loop`` on the first SIGINT/SIGTERM; exit the process with
    status 128 + signal number on a second one, or ``grace`` seconds after the first if
    it has not ended by then.

    Call it from the main thread before other threads start (they inherit the blocked
    signals); elsewhere it falls back to ``loop.add_signal_handler``.
    """
    if threading.current_thread() is not threading.main_thread():
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop)
        return
    sigs = set(STOP_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)

    def watch() -> None:
        first = signal.sigwait(sigs)
        try:
            loop.call_soon_threadsafe(stop)
        except RuntimeError:  # the loop is already closed: the process is ending
            return
        again = signal.sigtimedwait(sigs, grace)
        why = (f"a second {signal.Signals(again.si_signo).name}" if again is not None else
               f"{grace:g}s after {signal.Signals(first).name}")
        os.write(2, f"siftbus: {name} stopped at once ({why})\n".encode())
        os._exit(128 + (again.si_signo if again is not None else first))

    threading.Thread(target=watch, name="siftbus-signals", daemon=True).start()


__all__ = ["STOP_SIGNALS", "stop_on_signals"]
