"""``siftbus ARGS`` in a process of its own, forked from a server that has imported the CLI
once, so that hundreds of bad-input runs do not each pay for an interpreter and its
imports (about 0.4 CPU-s a run, most of the hostile-input tests' cost).

The forked process is a real one: its own pid, exit status, stdin, stdout, stderr, cwd,
environment and memory (sampled by the caller with psutil), and it runs what the
``siftbus`` console script runs (``siftbus.cli:main``) with ``sys.argv`` set as that
script sets it; an exception that escapes is printed by ``sys.excepthook`` with exit
status 1, as the interpreter does. What it does not repeat is the interpreter's start and
the imports, so a test of those (start-up, what a command imports, a module that fails
to import) runs the command with :func:`subprocess.run` instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PRELOAD = ["numpy", "siftbus.wire.cloudevents", "siftbus.match.engines", "siftbus.client",
           "siftbus.broker.server", "siftbus.channel", "siftbus.lang.etcl"]
"""Imported by the server before it forks: what ``check``, ``match``, ``publish`` and
the channel commands import as they run (a fork's memory starts at the server's, so not
Spark, numba or lxml)."""

_SERVER = r'''
import atexit, json, os, select, signal, socket, struct, sys, traceback
import importlib
import siftbus.cli  # every command registered: what the forks share
siftbus.cli.app  # made now (typer imported, every command registered), not per fork
for name in sys.argv[2:]:  # what the commands import when they run (not Spark)
    importlib.import_module(name)
path = sys.argv[1]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(64)
print("ready", flush=True)
waiting = {}  # pidfd -> (pid, connection)
while True:
    ready, _, _ = select.select([listener, *waiting], [], [])
    for r in ready:
        if r is listener:
            conn, _ = listener.accept()
            head, fds, _, _ = socket.recv_fds(conn, 4, 3)
            size = struct.unpack("!i", head)[0]
            body = b""
            while len(body) < size:
                body += conn.recv(size - len(body))
            req = json.loads(body)
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                for fd in waiting:
                    os.close(fd)
                for i, fd in enumerate(fds):
                    os.dup2(fd, i)
                    os.close(fd)
                os.chdir(req["cwd"])
                os.environ.clear()
                os.environ.update(req["env"])
                signal.signal(signal.SIGINT, signal.default_int_handler)
                sys.argv = ["siftbus", *req["args"]]
                code = 0
                try:
                    siftbus.cli.main()
                except SystemExit as e:
                    if e.code is None:
                        code = 0
                    elif isinstance(e.code, int):
                        code = e.code
                    else:
                        print(e.code, file=sys.stderr)
                        code = 1
                except BaseException:
                    sys.excepthook(*sys.exc_info())
                    code = 1
                try:
                    atexit._run_exitfuncs()
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            conn.sendall(struct.pack("!i", pid))
            waiting[os.pidfd_open(pid)] = (pid, conn)
        else:
            pid, conn = waiting.pop(r)
            os.close(r)
            _, status = os.waitpid(pid, 0)
            conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
            conn.close()
'''


class _Server:
    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="siftbus-forks-")
        self.path = str(Path(self.dir.name) / "socket")
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, self.path, *PRELOAD],
                                     cwd=ROOT,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"the fork server did not start: {line!r}"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.dir.cleanup()


_server: _Server | None = None
_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _lock:
        if _server is None or _server.proc.poll() is not None:
            _server = _Server()
            atexit.register(_server.close)
        return _server


class Forked:
    """A running ``siftbus ARGS``: its pid, and :meth:`wait` for its exit status."""

    def __init__(self, args: list[str], *, stdin: int, stdout: int, stderr: int,
                 cwd: Path | str, env: dict[str, str] | None) -> None:
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.connect(_the_server().path)
        req = {"args": list(args), "cwd": str(cwd),
               "env": dict(os.environ if env is None else env)}
        body = json.dumps(req).encode()
        socket.send_fds(self.conn, [struct.pack("!i", len(body))], [stdin, stdout, stderr])
        self.conn.sendall(body)
        self.pid: int = struct.unpack("!i", self._read(4))[0]
        self.returncode: int | None = None

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the fork server closed the connection")
            data += chunk
        return data

    def poll(self, timeout: float) -> int | None:
        """The exit status once the process has ended, waiting at most ``timeout`` s."""
        if self.returncode is None:
            self.conn.settimeout(timeout)
            try:
                self.returncode = struct.unpack("!i", self._read(4))[0]
            except TimeoutError:
                return None
            self.conn.close()
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, 9)
        self.poll(30)


def run(args: list[str], *, cwd: Path | str = ROOT, timeout: float = 120.0
        ) -> subprocess.CompletedProcess[str]:
    """``siftbus ARGS`` to its end, as :func:`subprocess.run` with ``capture_output`` and
    ``text`` gives it (stdin empty); a command still running after ``timeout`` seconds is
    killed and raises :class:`subprocess.TimeoutExpired`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(os.devnull, "rb") as null:
        proc = Forked(args, stdin=null.fileno(), stdout=out.fileno(), stderr=err.fileno(),
                      cwd=cwd, env=None)
        if proc.poll(timeout) is None:
            proc.kill()
            raise subprocess.TimeoutExpired(["siftbus", *args], timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(["siftbus", *args], proc.returncode or 0,
                                           out.read().decode(), err.read().decode())
