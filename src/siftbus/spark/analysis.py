"""Analysis jobs over notification logs and benchmark results, with PNG plots.

Over a pipeline's output directory (``matches.jsonl`` and ``notifications/``):

* matches per event: how many events matched 0, 1, 2, ... profiles (Bittner's p^e and
  p^p come out of it: the share of events that match anything, and the mean matches);
* per-subscriber load: notifications per subscriber;
* hot profiles: the profiles that fire most.

Over ``bench/results/spark.json``: match-stage events/s by profile count and formulation.
Plots use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftbus.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True, slots=True)
class AnalysisReport:
    """Figures of one notification log."""

    events: int
    """Events in the log."""
    notifications: int
    """(event, profile) pairs."""
    p_e: float
    """Share of events that matched at least one profile."""
    p_p: float
    """Mean number of matched profiles per event."""
    sigma: float
    """Event load: notifications per matching event (p_p / p_e)."""
    histogram: tuple[tuple[int, int], ...]
    """(number of matches, events with that many)."""
    subscribers: tuple[tuple[str, int], ...]
    """(subscriber, notifications), busiest first."""
    hot_profiles: tuple[tuple[str, int], ...]
    """(profile, notifications), busiest first (top N)."""
    plots: tuple[str, ...] = field(default_factory=tuple)
    """PNG files written."""


def matches_per_event(matched: DataFrame) -> list[tuple[int, int]]:
    """(k, events with exactly k matches) from a DataFrame with a ``matches`` array."""
    from pyspark.sql import functions as F

    rows = matched.groupBy(F.size("matches").alias("k")).count().orderBy("k").collect()
    return [(int(r["k"]), int(r["count"])) for r in rows]


def subscriber_load(notifications: DataFrame) -> list[tuple[str, int]]:
    """(subscriber, notifications), busiest first."""
    from pyspark.sql import functions as F

    rows = (notifications.groupBy("subscriber").count()
            .orderBy(F.col("count").desc(), F.col("subscriber")).collect())
    return [(str(r["subscriber"]), int(r["count"])) for r in rows]


def hot_profiles(notifications: DataFrame, top: int = 20) -> list[tuple[str, int]]:
    """The ``top`` profiles by notifications."""
    from pyspark.sql import functions as F

    rows = (notifications.groupBy("profile").count()
            .orderBy(F.col("count").desc(), F.col("profile")).limit(top).collect())
    return [(str(r["profile"]), int(r["count"])) for r in rows]


def analyze_output(spark: SparkSession, out: str | Path, plots: str | Path | None = None, *,
                   top: int = 20) -> AnalysisReport:
    """Analyse a batch job's output directory; writes PNG plots to ``plots`` if given."""
    o = Path(out)
    matches_file = o / "matches.jsonl"
    notes_dir = o / "notifications"
    if not matches_file.is_file():
        raise ConfigError(f"{o} holds no matches.jsonl: not a pipeline output", source=str(o))
    matched = spark.read.schema("source string, event long, matches array<string>").json(
        str(matches_file))
    hist = matches_per_event(matched)
    if any(notes_dir.rglob("*.parquet")):
        notes = spark.read.parquet(str(notes_dir))
        subs = subscriber_load(notes)
        hot = hot_profiles(notes, top)
    else:
        subs, hot = [], []
    events = sum(n for _, n in hist)
    total = sum(k * n for k, n in hist)
    hit = sum(n for k, n in hist if k > 0)
    p_e = hit / events if events else 0.0
    p_p = total / events if events else 0.0
    written: list[str] = []
    if plots is not None:
        pdir = Path(plots)
        pdir.mkdir(parents=True, exist_ok=True)
        written.append(_bar(pdir / "matches_per_event.png", [str(k) for k, _ in hist],
                            [n for _, n in hist], "matches per event", "matched profiles",
                            "events", log=True))
        written.append(_bar(pdir / "subscriber_load.png", [s for s, _ in subs[:30]],
                            [n for _, n in subs[:30]], "notifications per subscriber (top 30)",
                            "subscriber", "notifications", rotate=True))
        written.append(_bar(pdir / "hot_profiles.png", [p for p, _ in hot],
                            [n for _, n in hot], f"hot profiles (top {top})", "profile",
                            "notifications", rotate=True))
    return AnalysisReport(events, total, p_e, p_p, p_p / p_e if p_e else 0.0, tuple(hist),
                          tuple(subs), tuple(hot), tuple(written))


def _bar(path: Path, labels: list[str], values: list[int], title: str, xlabel: str,
         ylabel: str, *, log: bool = False, rotate: bool = False) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    try:
        ax.bar(range(len(values)), values, color="#3b6ea5")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=70 if rotate else 0, ha="right" if rotate else "center",
                           fontsize=7 if rotate else 9)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if log and values and max(values) > 0:
            ax.set_yscale("log")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return str(path)


def plot_bench(results: str | Path, png: str | Path) -> str:
    """Plot ``bench/results/spark.json``: events/s by profile count per formulation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data: dict[str, Any] = json.loads(Path(results).read_text(encoding="utf-8"))
    series: dict[str, list[tuple[int, float]]] = {}
    for row in data.get("match_stage", []):
        series.setdefault(row["formulation"], []).append(
            (int(row["profiles"]), float(row["events_per_s"])))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        for name, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("profiles")
        ax.set_ylabel("events/s through the match stage")
        ax.set_title("Spark match stage (local, median of repeats)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=110)
    finally:
        plt.close(fig)
    return str(png)


__all__ = [
    "AnalysisReport",
    "analyze_output",
    "hot_profiles",
    "matches_per_event",
    "plot_bench",
    "subscriber_load",
]
