"""Channel servers for tests, on 127.0.0.1 port 0: in this process (:func:`serving`), or
in a subprocess (``python -m siftbus.channel.remote``) for the kill-and-restart tests."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from siftbus.channel import EventChannelFactory
from siftbus.channel.remote import ChannelServer, ChannelService


@contextlib.asynccontextmanager
async def serving(factory: EventChannelFactory) -> AsyncIterator[ChannelServer]:
    """A started server for ``factory``; closed (with the factory) on exit."""
    srv = ChannelServer(ChannelService(factory))
    try:
        await srv.start()
        yield srv
    finally:
        await srv.close()
        srv.service.close()
        factory.close()


def start_server(store: Path, port_file: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start a server on ``store``; returns the process and its port (bounded: 30 s)."""
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "siftbus.channel.remote", "--store",
                             str(store), "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            raise AssertionError("the channel server did not start")
        time.sleep(0.02)
    return proc, int(port_file.read_text())


def stop_server(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM, then SIGKILL if the server has not exited within 10 s; the exit status."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)
