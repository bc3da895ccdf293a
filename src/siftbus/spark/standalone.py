"""A Spark standalone cluster on this machine: a master and workers started with
``spark-class`` from the pyspark installation (nothing downloaded), on 127.0.0.1.

What the scale-out benchmark and the cluster tests run the pipeline on, and what a user can
start to try ``--master spark://...`` before a real cluster::

    with StandaloneCluster(workers=2, cores=1) as url:
        ...  # siftbus pipeline run ... --master url

A real cluster is started the same way on each machine (``Master`` once, ``Worker URL``
on every node); see docs/pipeline.md, "On a cluster".
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from siftbus.errors import EnvironmentProblem

START_TIMEOUT = 120.0
"""Seconds to wait for the master to be elected and each worker to register."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The pyspark installation, which ships ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each; the context
    manager yields the master URL and stops every process on exit."""

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1g",
                 directory: str | Path | None = None) -> None:
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="siftbus-cluster-"))
        self.url = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    def _start(self, args: list[str], log: Path, ready: str) -> None:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.directory / "logs"),
               "SPARK_WORKER_DIR": str(self.directory / "work")}
        with log.open("wb") as f:
            proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=f,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._procs.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if ready in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-2000:]
        raise EnvironmentProblem(f"Spark standalone process did not start ({args[0]}): {tail}")

    def __enter__(self) -> str:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise EnvironmentProblem("Spark needs Java: no `java` on PATH and no JAVA_HOME")
        self.directory.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        try:
            self._start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(_free_port())],
                        self.directory / "master.log", "I have been elected leader")
            for i in range(self.workers):
                self._start(["org.apache.spark.deploy.worker.Worker", self.url, "--host",
                             "127.0.0.1", "--port", str(_free_port()), "--webui-port",
                             str(_free_port()), "--cores", str(self.cores), "--memory",
                             self.memory, "--work-dir", str(self.directory / f"work{i}")],
                            self.directory / f"worker{i}.log",
                            "Successfully registered with master")
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        """Stop every process (TERM, then KILL after 30 s)."""
        for p in reversed(self._procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=30)
        self._procs.clear()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["START_TIMEOUT", "StandaloneCluster", "spark_home"]
