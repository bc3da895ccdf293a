"""``siftbus demo``: what ``make demo`` runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path(
            "demo-out"),
        seed: Annotated[int, typer.Option(help="Seed of the generated day.")] = 42,
        scale: Annotated[float, typer.Option(help="Events per day, relative to ~300k.")] = 1.0,
        master: Annotated[str, typer.Option(help="Spark master URL.")] = "local[*]",
        live: Annotated[str, typer.Option(
            help="Alarm delivery: auto (broker network if usable, else files), broker, "
            "files.")] = "auto",
        examples: Annotated[Path | None, typer.Option(
            help="The building example directory (default: examples/building).")] = None,
        no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
    ) -> None:
        """Generate a day of building events, match them on Spark, deliver the alarms live,
        and print a summary with where the outputs and plots are."""
        from siftbus.spark.demo import print_demo, run_demo

        start = time.perf_counter()
        result = run_demo(out, seed=seed, scale=scale, master=master, live=live,
                          examples=examples, progress=not no_progress,
                          say=lambda text: typer.echo(text, err=True))
        print_demo(result)
        typer.echo(f"\ndemo finished in {time.perf_counter() - start:.0f} s")
