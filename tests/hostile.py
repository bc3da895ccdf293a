"""Running bad input through the real ``siftbus`` command, as a hostile user would.

Every parser's corpus of bad inputs goes through :func:`run_bad`, which asserts the
error contract of ``../shared/DESIGN.md``: exit status 2, exactly one line on stderr that
starts ``siftbus: error:``, no traceback, an error line of readable length, and bounds on
wall time and on the peak resident memory of the process (sampled with psutil). Each
run is a process of its own, forked from one that has imported the CLI already
(:mod:`forked_cli`): the command's own work, without an interpreter start per input.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from forked_cli import Forked

ROOT = Path(__file__).resolve().parents[1]

MAX_ERROR_LINE = 600
"""An error line names the place and shows an excerpt, never the whole input."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the command did with one bad input."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int
    """Peak resident set size of the process in bytes (sampled every 20 ms)."""


def run_cli(args: list[str], *, stdin: bytes | None = None, timeout: float = 60.0,
            cwd: Path = ROOT) -> Outcome:
    """Run ``siftbus ARGS`` in a process of its own (forked from one that has imported
    the CLI: :mod:`forked_cli`) and measure it; kills it after ``timeout`` seconds."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        if stdin is not None:
            fin.write(stdin)
            fin.seek(0)
        with open(os.devnull, "rb") as null:
            proc = Forked(args, stdin=(fin if stdin is not None else null).fileno(),
                          stdout=fout.fileno(), stderr=ferr.fileno(), cwd=cwd, env=None)
        ps = psutil.Process(proc.pid)
        peak = 0
        deadline = start + timeout
        while proc.poll(0.02) is None:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"siftbus {' '.join(args)} did not finish in {timeout}s")
            with contextlib.suppress(psutil.Error):
                peak = max(peak, ps.memory_info().rss)
        assert proc.returncode is not None
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read(), ferr.read()
    return Outcome(proc.returncode, out.decode("utf-8", "replace"),
                   err.decode("utf-8", "replace"), time.monotonic() - start, peak)


def assert_one_error(o: Outcome, *, where: str | None = None, max_seconds: float = 30.0,
                     max_rss: int = 1024 * 1024 * 1024) -> str:
    """Assert the error contract; returns the error line.

    ``where``, when given, must appear in the line (a file name, ``line 3``, ...).
    """
    assert "Traceback" not in o.stderr, o.stderr[-2000:]
    lines = [x for x in o.stderr.splitlines() if x.strip()]
    assert o.returncode == 2, (o.returncode, o.stderr[-2000:])
    assert len(lines) == 1, o.stderr[-2000:]
    line = lines[0]
    assert line.startswith("siftbus: error: "), line[:300]
    assert len(line) <= MAX_ERROR_LINE, f"error line of {len(line)} characters: {line[:200]}..."
    if where is not None:
        assert where in line, line
    assert o.seconds <= max_seconds, f"took {o.seconds:.1f}s"
    assert o.peak_rss <= max_rss, f"peak RSS {o.peak_rss / 2**20:.0f} MiB"
    return line


def run_bad(args: list[str], *, stdin: bytes | None = None, where: str | None = None,
            timeout: float = 60.0, max_rss: int = 1024 * 1024 * 1024) -> str:
    """Run the command on bad input and assert the error contract; returns the error line."""
    return assert_one_error(run_cli(args, stdin=stdin, timeout=timeout), where=where,
                            max_seconds=timeout, max_rss=max_rss)
