"""The pipeline on a real Spark standalone cluster (a master and two workers started from
the pyspark installation on 127.0.0.1) gives the same notifications as local[*]: the
executors write the outputs themselves (they share the driver's filesystem here) and the
driver commits them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from siftbus.model import load_schema
from siftbus.spark.pipeline import run_files
from siftbus.spark.standalone import StandaloneCluster

from .jobs import (
    PROFILES_TEXT,
    SCHEMA_TOML,
    expected_notifications,
    read_notifications,
    siftbus_exe,
    write_event_files,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two one-core workers (two executors, so
    tasks really run in separate processes); stopped afterwards."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java")
    with StandaloneCluster(workers=2, cores=1, memory="1g", directory=tmp_path / "cluster"
                           ) as url:
        yield url


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
