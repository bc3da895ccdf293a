"""A streaming job killed with SIGKILL and restarted from its checkpoint neither loses nor
duplicates notifications in the Parquet sink (keyed by source, event id and profile id)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .jobs import (
    PROFILES_TEXT,
    SCHEMA_TOML,
    expected_notifications,
    read_notifications,
    siftbus_exe,
    webhook_server,
    write_event_files,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _commits(ck: Path) -> int:
    d = ck / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def _stream_command(tmp_path: Path) -> list[str]:
    """``siftbus pipeline stream`` over ``tmp_path/in`` into ``out`` (checkpoint ``ck``)."""
    schema = tmp_path / "schema.toml"
    schema.write_text(SCHEMA_TOML)
    profiles = tmp_path / "profiles.txt"
    profiles.write_text(PROFILES_TEXT)
    return [siftbus_exe(), "pipeline", "stream", "--schema", str(schema), "--profiles",
            str(profiles), "--watch", str(tmp_path / "in"), "--out", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), "--master", "local[2]",
            "--shuffle-partitions", "2"]


def test_kill_and_restart_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    watch, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    files = write_event_files(watch, files=6, per_file=40, seed=1)
    base = [*_stream_command(tmp_path), "--max-files-per-trigger", "1"]
    log1 = (tmp_path / "run1.log").open("w")
    first = subprocess.Popen(base, stdout=log1, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while _commits(ck) < 2:
            assert first.poll() is None, (tmp_path / "run1.log").read_text()
            assert time.monotonic() < deadline, "the stream committed nothing in 300 s"
            time.sleep(0.2)
        # Mid-stream: batch 2 is being written; kill the driver and its JVM without mercy.
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=60)
        log1.close()
    committed = _commits(ck)
    assert committed < len(files), "killed too late: everything was already processed"
    files += write_event_files(watch, files=2, per_file=40, seed=2)
    second = subprocess.run([*base, "--available-now"], capture_output=True, text=True,
                            timeout=400)
    assert second.returncode == 0, second.stdout + second.stderr
    got = read_notifications(out / "notifications")
    assert len(got) == len(set(got)), "duplicate notifications after the restart"
    assert set(got) == expected_notifications(files)


def test_stop_when_idle_waits_for_a_first_batch_longer_than_the_idle_limit(
        tmp_path: Path) -> None:
    # Batch 0 takes over 8 s (its webhook answers each POST after 4 s); --stop-when-idle 2
    # must not cut it off: idle means no batch running and no new input.
    out, ck = tmp_path / "out", tmp_path / "ck"
    files = write_event_files(tmp_path / "in", files=1, per_file=60, seed=3)
    with webhook_server(delay=4.0) as (url, received):
        r = subprocess.run([*_stream_command(tmp_path), "--stop-when-idle", "2",
                            "--webhook", f"*={url}"],
                           capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("batch 0: "), r.stdout + r.stderr
    assert "idle for 2s" in r.stderr
    assert _commits(ck) == 1, "batch 0 was not committed"
    got = read_notifications(out / "notifications")
    assert sorted(got) == sorted(expected_notifications(files))
    assert sum(len(b["notifications"]) for b in received) == len(got)
