"""What Spark is doing, in words: named steps and a progress display of their stages.

Spark names a stage after the code that created it (``$anonfun$withThreadLocalCaptured$2``
for most DataFrame actions), which tells a user nothing. Every action of the pipeline runs
inside :func:`job_step`, which puts the Spark jobs it starts into a job group whose
description says what they do ("matching events against the profiles"); the Spark UI
shows the same description. :func:`spark_progress` polls Spark's status tracker and draws
one bar per active stage, labelled with its step (tasks done / total) on stderr.

Job groups are properties of the calling thread (PySpark pins each Python thread to a JVM
thread), so steps run on different threads do not mix their labels.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

_GROUP_PREFIX = "siftbus-step-"
_KEEP_STEPS = 64
"""Steps remembered for labelling (older ones have finished long ago)."""

_ids = itertools.count(1)
_last = 0
"""The id of the latest step (see :func:`step_mark`)."""
_lock = threading.Lock()
_steps: dict[str, str] = {}
"""Job group id -> what its jobs do (the most recent :data:`_KEEP_STEPS` steps)."""


@contextmanager
def job_step(spark: SparkSession, what: str) -> Iterator[None]:
    """Label the Spark jobs started inside the block with ``what`` (progress display and
    Spark UI); the previous label of the thread comes back afterwards."""
    global _last
    sc = spark.sparkContext
    with _lock:
        _last = next(_ids)
        group = f"{_GROUP_PREFIX}{_last}"
        _steps[group] = what
        while len(_steps) > _KEEP_STEPS:
            del _steps[next(iter(_steps))]
    old_group = sc.getLocalProperty("spark.jobGroup.id")
    old_what = sc.getLocalProperty("spark.job.description")
    sc.setJobGroup(group, what)
    try:
        yield
    finally:
        # None removes the property (the JVM side takes null as "unset").
        sc.setLocalProperty("spark.jobGroup.id", old_group)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", old_what)  # type: ignore[arg-type]


def step_mark() -> int:
    """A mark for :func:`jobs_since`: the id of the latest step so far."""
    with _lock:
        return _last


def jobs_since(spark: SparkSession, mark: int) -> int:
    """How many Spark jobs the steps after ``mark`` (:func:`step_mark`) started, as
    Spark's status tracker knows them (each step is remembered while it is among the
    latest :data:`_KEEP_STEPS`)."""
    tracker = spark.sparkContext.statusTracker()
    with _lock:
        groups = [g for g in _steps if int(g.removeprefix(_GROUP_PREFIX)) > mark]
    return sum(len(tracker.getJobIdsForGroup(g)) for g in groups)


def stage_labels(spark: SparkSession) -> dict[int, tuple[str, int, int]]:
    """Every active stage: ``stage id -> (label, tasks done, tasks)``.

    The label is the description of the :func:`job_step` whose job runs the stage, or
    ``"Spark stage N"`` for a stage started outside any step (never Spark's internal
    closure name).
    """
    tracker = spark.sparkContext.statusTracker()
    active = tracker.getActiveStageIds()
    if not active:
        return {}
    with _lock:
        steps = list(_steps.items())
    owner: dict[int, str] = {}
    for group, what in reversed(steps):  # newest first: active stages are recent
        for job in tracker.getJobIdsForGroup(group):
            job_info = tracker.getJobInfo(job)
            if job_info is not None:
                for sid in job_info.stageIds:
                    owner.setdefault(int(sid), what)
        if all(s in owner for s in active):
            break
    out: dict[int, tuple[str, int, int]] = {}
    for sid in active:
        info = tracker.getStageInfo(sid)
        if info is None:
            continue
        out[int(sid)] = (owner.get(int(sid), f"Spark stage {sid}"),
                         int(info.numCompletedTasks), int(info.numTasks))
    return out


@contextmanager
def spark_progress(spark: SparkSession, *, enabled: bool = True,
                   console: Console | None = None, interval: float = 0.25) -> Iterator[None]:
    """Show the active stages (label, tasks done / total) on stderr while the block runs."""
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console or Console(stderr=True), transient=True)
    stop = threading.Event()
    poll = _poller(spark, progress, stop, interval)
    with progress:
        t = threading.Thread(target=poll, name="siftbus-spark-progress", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(timeout=5)


def _poller(spark: SparkSession, progress: Any, stop: threading.Event, interval: float
            ) -> Callable[[], None]:
    def poll() -> None:
        tasks: dict[int, Any] = {}
        while not stop.wait(interval):
            try:
                stages = stage_labels(spark)
            except Exception:  # the context is shutting down
                return
            for sid, (label, done, total) in stages.items():
                if sid not in tasks:
                    tasks[sid] = progress.add_task(label, total=total)
                progress.update(tasks[sid], completed=done, total=total)
            for sid in [s for s in tasks if s not in stages]:
                progress.remove_task(tasks.pop(sid))

    return poll


__all__ = ["job_step", "jobs_since", "spark_progress", "stage_labels", "step_mark"]
