"""``siftbus demo`` as a newcomer sees it: the real command in its own process and JVM."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .jobs import siftbus_exe

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_demo_says_what_it_does_and_keeps_the_jvm_out_of_the_terminal(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    r = subprocess.run([siftbus_exe(), "demo", "--scale", "0.02", "--seed", "7", "--out",
                        str(out), "--live", "files"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    err = r.stderr.splitlines()
    # Up front: what it will do, how long it takes and where Spark's messages go.
    assert err[0] == "siftbus demo: one day of a building's sensors, matched on Spark."
    log = out / "spark.log"
    assert f"its own messages go to {log}" in r.stderr
    assert "About a minute" in r.stderr
    assert [x.split("]")[0] for x in err if x.startswith("[")] == [
        "[1/5", "[2/5", "[3/5", "[4/5", "[5/5"]
    # Nothing from the JVM in the terminal; it is in the named log file.
    jvm = re.compile(r"WARN|WARNING|log level|setLogLevel|\$anonfun|Exception|^\s+at ")
    assert [x for x in (r.stdout + r.stderr).splitlines() if jvm.search(x)] == []
    assert "Using incubator modules" in log.read_text()
    # Figures in plain words: processed is not matched; the share that matched is given.
    m = re.search(r"events processed \(parsed, checked, matched\)\s*│\s+([\d,]+) │",
                  r.stdout)
    assert m is not None, r.stdout
    processed = int(m[1].replace(",", ""))
    m = re.search(r"events that matched a profile \(p\^e\)\s*│\s+([\d,]+) \((\d+\.\d)%\) │",
                  r.stdout)
    assert m is not None, r.stdout
    hit = int(m[1].replace(",", ""))
    assert 0 < hit < processed
    assert float(m[2]) == round(100 * hit / processed, 1)
    assert "events matched by the pipeline" not in r.stdout
    assert "profiles matched per event, mean (p^p)" in r.stdout
    assert "Bittner (2003)" in r.stdout
    assert f"Spark's own messages: {log}" in r.stdout
    # The composite step: both rules, and the broker's engine agrees with Spark.
    assert re.search(r"security-alarm\s*│\s*security\s*│\s*3 │", r.stdout), r.stdout
    assert "heating-fault" in r.stdout and "the same as Spark's" in r.stdout
    for png in ("matches_per_event.png", "subscriber_load.png", "hot_profiles.png"):
        assert (out / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # What Spark costs and buys at this size: the job's events/s beside siftbus match's on
    # the same files, both figures there and positive.
    for label in (r"events/s, Spark pipeline \(with sinks\)",
                  r"events/s, siftbus match, same files"):
        m = re.search(label + r"[^│]*│\s+([\d,]+) │", r.stdout)
        assert m is not None and int(m[1].replace(",", "")) > 0, (label, r.stdout)
    assert (out / "match-one-process.jsonl").read_text().splitlines()
