"""Ctrl-C during a Spark job (``siftbus demo``, ``siftbus pipeline run|stream``): one
line, Spark stopped, no JVM left behind, exit 130 within a few seconds.

pyspark's own SIGINT handling cancels the jobs and raises ``KeyboardInterrupt`` in the
driver; left alone, the interpreter's shutdown then tears py4j connections apart while
the JVM still works, which prints a traceback per connection and can take tens of
seconds. Here the first Ctrl-C stops the SparkContext (bounded in time), kills the JVM if
it has not gone, and leaves the process at once with 130; a second Ctrl-C meanwhile
leaves at once too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

STOP_SECONDS = 4.0
"""How long the SparkContext may take to stop before its JVM is killed."""

_INTERRUPTED = threading.Event()
"""Set by a Ctrl-C or SIGTERM during a Spark job: an interrupted py4j call surfaces as one
of py4j's own errors, which then means the interrupt, not a failure."""


def _on_interrupt(signum: int, frame: object) -> None:
    _INTERRUPTED.set()
    # py4j logs the interrupted call with a traceback (on the root logger): Spark is being
    # stopped and one line says so, nothing else belongs on the terminal
    logging.getLogger().setLevel(logging.CRITICAL)
    raise KeyboardInterrupt


def _active_context() -> Any:
    mod = sys.modules.get("pyspark")
    if mod is None:
        return None
    return getattr(mod.SparkContext, "_active_spark_context", None)


def _jvm_process(sc: Any) -> Any:
    gateway = getattr(sc, "_gateway", None)
    return getattr(gateway, "proc", None)


def stop_spark_now(say: str = "interrupted") -> None:
    """Stop the running Spark (if any) within :data:`STOP_SECONDS`, kill its JVM, print
    one line and leave the process with status 130."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))  # a second Ctrl-C: at once
    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway", "pyspark"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # no traceback per connection
    sc = _active_context()
    # before a context exists (an interrupted start) the JVM is the class's gateway's
    mod = sys.modules.get("pyspark")
    proc = _jvm_process(sc if sc is not None else getattr(mod, "SparkContext", None))
    if sc is not None:
        stopper = threading.Thread(target=_stop_quietly, args=(sc,), daemon=True)
        stopper.start()
        stopper.join(STOP_SECONDS)
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(2)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os.write(2, f"siftbus: {say}; Spark stopped\n".encode())
    os._exit(130)


def _stop_quietly(sc: Any) -> None:
    with contextlib.suppress(Exception):
        sc.cancelAllJobs()
    with contextlib.suppress(Exception):
        sc.stop()


@contextlib.contextmanager
def spark_interruptible() -> Iterator[None]:
    """Around a Spark job in the CLI: Ctrl-C (or SIGTERM) ends it cleanly."""
    previous = signal.getsignal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, _on_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        stop_spark_now()
    except Exception:
        if _INTERRUPTED.is_set():
            stop_spark_now()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def spark_starting() -> Iterator[None]:
    """Around the session's start: Ctrl-C (or SIGTERM) is held until the start is over or
    has failed, then ends the command as during a job. An interrupt in the middle of the
    start otherwise surfaces as one of py4j's errors, "Spark did not start", and exit 2
    (the JVM in the same process group gets the Ctrl-C too)."""
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    except Exception:
        if held & signal.sigpending():
            stop_spark_now()
        raise
    else:
        if held & signal.sigpending():
            stop_spark_now()
        # pyspark's own SIGINT handler makes a py4j call from inside another; ours only
        # notes the interrupt (spark_interruptible then stops Spark once)
        signal.signal(signal.SIGINT, _on_interrupt)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


__all__ = ["STOP_SECONDS", "spark_interruptible", "spark_starting", "stop_spark_now"]
