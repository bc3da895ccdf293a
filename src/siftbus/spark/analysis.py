"""Analysis jobs over notification logs and benchmark results, with PNG plots.

Over a pipeline's output directory (``matches.jsonl`` and ``notifications/``):

* matches per event: how many events matched 0, 1, 2, ... profiles (Bittner's p^e and
  p^p come out of it: the share of events that match at least one profile, and the mean
  number of profiles an event matches);
* per-subscriber load: notifications per subscriber;
* hot profiles: the profiles that fire most.

Over ``bench/results/spark.json``: match-stage events/s by profile count and formulation.
Plots use matplotlib's Agg backend (no display needed); each carries a caption naming the
run and the totals it is part of.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftbus.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
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
                   top: int = 20, run: str | None = None) -> AnalysisReport:
    """Analyse a batch job's output directory; writes PNG plots to ``plots`` if given.

    ``run`` names the run in each plot's caption (default: the output directory); the
    caption adds the totals the plot is a part of.
    """
    from siftbus.spark.progress import job_step

    o = Path(out)
    matches_file = o / "matches.jsonl"
    notes_dir = o / "notifications"
    if not matches_file.is_file():
        raise ConfigError(f"{o} holds no matches.jsonl: not a pipeline output", source=str(o))
    matched = spark.read.schema("source string, event long, matches array<string>").json(
        str(matches_file))
    with job_step(spark, "analysis: counting matches per event"):
        hist = matches_per_event(matched)
    if any(notes_dir.rglob("*.parquet")):
        with job_step(spark, "analysis: reading the notifications"):
            notes = spark.read.parquet(str(notes_dir))
        with job_step(spark, "analysis: notifications per subscriber"):
            subs = subscriber_load(notes)
        with job_step(spark, "analysis: the profiles that fire most"):
            hot = hot_profiles(notes, top)
            fired = notes.select("profile").distinct().count()
    else:
        subs, hot, fired = [], [], 0
    events = sum(n for _, n in hist)
    total = sum(k * n for k, n in hist)
    hit = sum(n for k, n in hist if k > 0)
    p_e = hit / events if events else 0.0
    p_p = total / events if events else 0.0
    written: list[str] = []
    if plots is not None:
        pdir = Path(plots)
        pdir.mkdir(parents=True, exist_ok=True)
        name = run or str(o)
        totals = (f"{events:,} events, {total:,} notifications; {hit:,} events "
                  f"({p_e:.1%}) matched at least one profile")
        figures = [
            ("matches_per_event.png", matches_figure(hist, f"{name}\n{totals}")),
            ("subscriber_load.png", ranking_figure(
                subs[:30], len(subs), total, "notifications per subscriber", "subscriber",
                name)),
            ("hot_profiles.png", ranking_figure(
                hot, fired, total, "the profiles that fire most", "profile", name)),
        ]
        written += [_save(fig, pdir / fname) for fname, fig in figures]
    return AnalysisReport(events, total, p_e, p_p, p_p / p_e if p_e else 0.0, tuple(hist),
                          tuple(subs), tuple(hot), tuple(written))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def matches_figure(hist: list[tuple[int, int]], caption: str) -> Figure:
    """Events by the number of profiles they matched: a bar at each true count on a
    linear axis (counts no event had stay visible as gaps), events on a log axis."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    ks = [k for k, _ in hist]
    ns = [n for _, n in hist]
    ax.bar(ks, ns, width=0.8, color="#3b6ea5")
    for k, n in hist:  # upright labels: neighbouring counts (0, 1, 2) must not collide
        ax.annotate(f"{n:,}", (k, n), ha="center", va="bottom", fontsize=7, rotation=90,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xlim(-1, max(ks, default=0) + 1)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if ns and max(ns) > 0:
        ax.set_yscale("log")
        ax.set_ylim(top=max(ns) * 20)  # room for the labels above the tallest bar
    ax.set_title("How many profiles each event matched")
    ax.set_xlabel("profiles matched by one event")
    ax.set_ylabel("events (log scale)")
    _caption(fig, caption)
    return fig


def ranking_figure(top: list[tuple[str, int]], of: int, total: int, title: str, what: str,
                   run: str) -> Figure:
    """The largest ``top`` (name, notifications) of ``of`` subscribers or profiles as
    bars, with a caption saying what share of all ``total`` notifications they got."""
    plt = _pyplot()
    part = sum(n for _, n in top)
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.bar(range(len(top)), [n for _, n in top], color="#3b6ea5")
    ax.set_xticks(range(len(top)))
    ax.set_xticklabels([name for name, _ in top], rotation=70, ha="right", fontsize=7)
    ax.set_title(f"{title}: top {len(top)} of {of:,} {what}s with notifications")
    ax.set_xlabel(what)
    ax.set_ylabel("notifications")
    share = f" ({part / total:.1%})" if total else ""
    _caption(fig, f"{run}\nthese {len(top)} {what}s got {part:,} of all {total:,} "
                  f"notifications{share}")
    return fig


def _caption(fig: Figure, text: str) -> None:
    fig.text(0.01, 0.01, text, ha="left", va="bottom", fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.04 + 0.025 * text.count("\n"), 1, 1))


def _save(fig: Figure, path: Path) -> str:
    plt = _pyplot()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return str(path)


def plot_bench(results: str | Path, png: str | Path) -> str:
    """Plot ``bench/results/spark.json``: events/s by profile count per formulation."""
    plt = _pyplot()
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
    "matches_figure",
    "matches_per_event",
    "plot_bench",
    "ranking_figure",
    "subscriber_load",
]
