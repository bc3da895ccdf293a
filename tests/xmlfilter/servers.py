"""Real uvicorn servers for the XML filter's HTTP tests: bound to 127.0.0.1 on port 0,
started and stopped by the tests' fixtures; a receiver of HTTP POST notifications and the
thesis's appendix 6 subscriptions and appendix 7 message."""

from __future__ import annotations

import asyncio
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request, Response

DATA = Path(__file__).resolve().parents[1] / "data" / "xml"
APPENDIX6 = (DATA / "appendix6_subscriptions.xml").read_bytes()
APPENDIX7 = (DATA / "appendix7_message.xml").read_bytes()


def receiver_app(inbox: list[tuple[str, bytes, dict[str, str]]], fail: bool = False) -> FastAPI:
    app = FastAPI()

    @app.post("/submit/{name}")
    async def submit(name: str, request: Request) -> Response:
        inbox.append((name, await request.body(), dict(request.headers)))
        return Response(status_code=500 if fail else 204)

    return app


class Running:
    """A started in-process server and its base URL."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None]) -> None:
        self.server = server
        self.task = task
        sock = server.servers[0].sockets[0]
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, 10)


async def serve(app: FastAPI) -> Running:
    """Start ``app`` on 127.0.0.1, port 0, in this event loop (5 s at most)."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    assert server.started
    return Running(server, task)


def start_cli_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    """``siftbus xml-filter serve --port 0 ARGS`` as a process; returns it and its URL
    (read from uvicorn's start-up line, 60 s at most)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "siftbus", "xml-filter", "serve", "--port", "0", *args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    stderr = proc.stderr
    threading.Thread(target=lambda: [lines.put(x) for x in stderr], daemon=True).start()
    for _ in range(600):
        try:
            line = lines.get(timeout=0.1)
        except queue.Empty:
            if proc.poll() is not None:
                raise AssertionError("server exited") from None
            continue
        m = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    proc.wait(10)
    raise AssertionError("server did not start in 60 s")
