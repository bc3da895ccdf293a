"""The pipeline on a real Spark standalone cluster (a master and a worker started from the
pyspark installation on 127.0.0.1) gives the same notifications as local[*]."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from siftbus.model import load_schema
from siftbus.spark.pipeline import run_files

from .jobs import (
    PROFILES_TEXT,
    SCHEMA_TOML,
    expected_notifications,
    read_notifications,
    siftbus_exe,
    write_event_files,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        assert proc.poll() is None, log.read_text(errors="replace")
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not seen in {log} within {timeout} s:\n"
                         + log.read_text(errors="replace")[-3000:])


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with one worker; both stopped afterwards."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java")
    home = _spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_WORKER_DIR": str(tmp_path / "work")}
    spark_class = [str(home / "bin" / "spark-class")]
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        mlog = tmp_path / "master.log"
        with mlog.open("wb") as f:
            procs.append(subprocess.Popen(
                [*spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(_free_port())],
                stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(mlog, "I have been elected leader", procs[0], 120)
        wlog = tmp_path / "worker.log"
        with wlog.open("wb") as f:
            procs.append(subprocess.Popen(
                [*spark_class, "org.apache.spark.deploy.worker.Worker", url,
                 "--host", "127.0.0.1", "--port", str(_free_port()),
                 "--webui-port", str(_free_port()), "--cores", "2", "--memory", "1g",
                 "--work-dir", str(tmp_path / "work")],
                stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(wlog, "Successfully registered with master", procs[1], 120)
        yield url
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=30)


def test_cluster_gives_the_same_notifications_as_local(standalone_cluster: str,
                                                        spark: object, tmp_path: Path) -> None:
    schema = tmp_path / "schema.toml"
    schema.write_text(SCHEMA_TOML)
    profiles = tmp_path / "profiles.txt"
    profiles.write_text(PROFILES_TEXT)
    config = tmp_path / "spark.toml"
    config.write_text('[spark]\nshuffle_partitions = 2\n\n[spark.conf]\n'
                      '"spark.executor.memory" = "512m"\n"spark.cores.max" = "2"\n')
    files = write_event_files(tmp_path / "events", files=3, per_file=200, seed=7)
    out = tmp_path / "out-cluster"
    r = subprocess.run(
        [siftbus_exe(), "pipeline", "run", "--schema", str(schema), "--profiles",
         str(profiles), "--events", str(tmp_path / "events"), "--out", str(out),
         "--master", standalone_cluster, "--config", str(config), "--no-progress"],
        capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    # The same job on local[*] (the test session's local[2]).
    local_out = tmp_path / "out-local"
    run_files(spark, load_schema(schema), profiles, [tmp_path / "events"], local_out)
    cluster = read_notifications(out / "notifications")
    local = read_notifications(local_out / "notifications")
    assert sorted(cluster) == sorted(local)
    assert set(cluster) == expected_notifications(files)
    assert len(cluster) == len(set(cluster))
    assert (out / "matches.jsonl").read_text() == (local_out / "matches.jsonl").read_text()
