"""``siftbus pipeline run|stream``: the Spark job from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from siftbus.errors import ConfigError

from ._spark_stop import spark_interruptible, spark_starting, stop_spark_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from siftbus.spark.pipeline import BatchReport
    from siftbus.spark.sinks import Sink


def _session(config: Path | None, master: str | None, shuffle_partitions: int | None,
             driver_memory: str | None, out: Path) -> SparkSession:
    """The session; Spark's own messages go to ``OUT/spark.log`` unless the config file
    names another ``log_file`` (the terminal keeps our output only)."""
    from siftbus.spark.session import build_session, load_settings

    settings = load_settings(config)
    settings = settings.with_overrides(
        master=master, shuffle_partitions=shuffle_partitions, driver_memory=driver_memory,
        log_file=settings.log_file or str(out / "spark.log"))
    with spark_starting():
        spark = build_session(settings)
    typer.echo(f"Spark runs on {settings.master}; its own messages go to "
               f"{settings.log_file}", err=True)
    return spark


def _check_engine(engine: str) -> None:
    """An engine of the registry that the match stage can run (see match.engines)."""
    from siftbus.spark.match_stage import engine_names

    if engine not in engine_names():
        raise ConfigError(f"unknown engine {engine!r}; choose one of "
                          f"{', '.join(engine_names())}", field="engine")


def _webhooks(specs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in specs:
        sub, sep, url = spec.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ConfigError(f"--webhook wants SUBSCRIBER=URL or *=URL, got {spec!r}",
                              field="webhook")
        out[sub] = url
    return out


def _delivery_sinks(webhook: list[str], deliver_dir: Path | None,
                    broker: str | None = None) -> list[Sink]:
    from siftbus.spark.delivery import BrokerDeliverer, FileDeliverer, WebhookDeliverer
    from siftbus.spark.sinks import DeliverySink

    sinks: list[Sink] = []
    if broker is not None:
        host, sep, port = broker.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"--deliver-broker wants HOST:PORT, got {broker!r}",
                              field="deliver-broker")
        sinks.append(DeliverySink(BrokerDeliverer(host.strip("[]"), int(port))))
    if webhook:
        sinks.append(DeliverySink(WebhookDeliverer(_webhooks(webhook))))
    if deliver_dir is not None:
        sinks.append(DeliverySink(FileDeliverer(deliver_dir)))
    return sinks


def print_report(report: BatchReport, *, title: str = "siftbus pipeline") -> None:
    """A summary table of a batch job on stdout."""
    from rich.console import Console
    from rich.table import Table

    from siftbus.spark.pipeline import summary_rows

    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in summary_rows(report):
        table.add_row(label, str(value))
    if report.seconds > 0:
        table.add_row("events/s (whole job)", f"{report.events / report.seconds:,.0f}")
    outputs = Table(title="outputs")
    outputs.add_column("sink")
    outputs.add_column("rows", justify="right")
    outputs.add_column("where")
    for s in report.sinks:
        outputs.add_row(s.sink, str(s.rows), s.where)
    console = Console()
    console.print(table)
    console.print(outputs)


Schema_ = Annotated[Path, typer.Option("--schema", "-s", help="Schema TOML file.")]
Profiles_ = Annotated[str, typer.Option(
    "--profiles", "-p", help="Profile file, or a broker store as sqlite:PATH.")]
Out_ = Annotated[Path, typer.Option("--out", "-o", help="Output directory.")]
Master_ = Annotated[str | None, typer.Option(
    "--master", help="Spark master URL (default local[*]; e.g. spark://127.0.0.1:7077).")]
Engine_ = Annotated[str, typer.Option("--engine", help="Matcher engine: index or reference.")]
Config_ = Annotated[Path | None, typer.Option(
    "--config", help="TOML file with a [spark] table of settings.")]
Shuffle_ = Annotated[int | None, typer.Option("--shuffle-partitions", help="Shuffle partitions.")]
Memory_ = Annotated[str | None, typer.Option("--driver-memory", help="e.g. 2g.")]
Webhook_ = Annotated[list[str], typer.Option(
    "--webhook", help="Deliver live: SUBSCRIBER=URL (or *=URL); repeatable.")]
Deliver_ = Annotated[Path | None, typer.Option(
    "--deliver-dir", help="Deliver live to JSON-lines files per subscriber here.")]
Broker_ = Annotated[str | None, typer.Option(
    "--deliver-broker", metavar="HOST:PORT", help="Deliver live: publish the matched "
    "events to the siftbus broker at HOST:PORT, whose subscribers get them.")]
NoProgress_ = Annotated[bool, typer.Option("--no-progress", help="No progress display.")]


def register(app: typer.Typer) -> None:
    pipeline = typer.Typer(help="Match event files or streams on Spark (local or a cluster).",
                           no_args_is_help=True)
    app.add_typer(pipeline, name="pipeline")

    @pipeline.command("run")
    def run(
        schema: Schema_,
        profiles: Profiles_,
        events: Annotated[list[Path], typer.Option(
            "--events", "-e", help="Event file or directory (repeatable).")],
        out: Out_,
        master: Master_ = None,
        engine: Engine_ = "index",
        fmt: Annotated[str, typer.Option(
            "--format", help="jsonl, parquet (wide), keyed (Parquet) or xml.")] = "jsonl",
        config: Config_ = None,
        shuffle_partitions: Shuffle_ = None,
        driver_memory: Memory_ = None,
        webhook: Webhook_ = [],  # noqa: B006 (typer reads the default)
        deliver_dir: Deliver_ = None,
        deliver_broker: Broker_ = None,
        no_progress: NoProgress_ = False,
    ) -> None:
        """Batch job: parse, validate, match and write notifications, counts, dead letters."""
        from siftbus.model import load_schema
        from siftbus.spark.pipeline import Pipeline, standard_sinks
        from siftbus.spark.progress import spark_progress
        from siftbus.spark.sources import SOURCE_FORMATS, existing_inputs, read_source
        from siftbus.spark.subscriptions import SubscriptionSet, profile_source

        # Every input is checked before Spark starts: a mistake costs no JVM start and
        # stays one error line (Spark's start adds a line of its own).
        _check_engine(engine)
        if fmt not in SOURCE_FORMATS:
            raise ConfigError(f"unknown event format {fmt!r}; choose one of "
                              f"{', '.join(SOURCE_FORMATS)}", field="format")
        existing_inputs(events)
        delivery = _delivery_sinks(webhook, deliver_dir, deliver_broker)
        sch = load_schema(schema)
        subs = SubscriptionSet(sch, profile_source(profiles), engine=engine)
        with spark_interruptible():
            spark = _session(config, master, shuffle_partitions, driver_memory, out)
            pipe = Pipeline(spark, sch, subs, [*standard_sinks(out), *delivery])
            try:
                with spark_progress(spark, enabled=not no_progress):
                    report = pipe.run(read_source(spark, events, fmt))
            finally:
                pipe.close()
        print_report(report)

    @pipeline.command("stream")
    def stream(
        schema: Schema_,
        profiles: Profiles_,
        out: Out_,
        watch: Annotated[Path | None, typer.Option(
            "--watch", help="Directory to watch for new files.")] = None,
        socket: Annotated[str | None, typer.Option(
            "--socket", help="Read JSON lines from a TCP socket on this machine, HOST:PORT "
            "(no replay after a restart).")] = None,
        fmt: Annotated[str, typer.Option(
            "--format", help="What the watched files hold: jsonl or xml.")] = "jsonl",
        checkpoint: Annotated[Path | None, typer.Option(
            "--checkpoint", help="Checkpoint directory (default OUT/_checkpoint).")] = None,
        master: Master_ = None,
        engine: Engine_ = "index",
        trigger: Annotated[float | None, typer.Option(
            "--trigger", help="Micro-batch interval in seconds (default: as fast as data "
            "comes).")] = None,
        available_now: Annotated[bool, typer.Option(
            "--available-now", help="Process what is there, then stop.")] = False,
        max_files: Annotated[int | None, typer.Option(
            "--max-files-per-trigger", help="Files per micro-batch.")] = None,
        idle_stop: Annotated[float | None, typer.Option(
            "--stop-when-idle", help="Stop after this many seconds idle: no batch running "
            "and no new data (a long batch is never cut off).")] = None,
        config: Config_ = None,
        shuffle_partitions: Shuffle_ = None,
        driver_memory: Memory_ = None,
        webhook: Webhook_ = [],  # noqa: B006 (typer reads the default)
        deliver_dir: Deliver_ = None,
        deliver_broker: Broker_ = None,
    ) -> None:
        """Streaming job over new files in a directory; follows subscription changes."""
        from siftbus.model import load_schema
        from siftbus.spark.pipeline import Pipeline, run_until_idle, streaming_sinks
        from siftbus.spark.sources import STREAM_FORMATS, socket_stream, watch_directory
        from siftbus.spark.subscriptions import SubscriptionSet, profile_source

        _check_engine(engine)
        if (watch is None) == (socket is None):
            raise ConfigError("give either --watch DIR or --socket HOST:PORT", field="watch")
        if watch is not None and not watch.is_dir():
            raise ConfigError(f"watch directory {watch} does not exist", source=str(watch))
        if fmt not in STREAM_FORMATS:
            raise ConfigError(f"unknown stream format {fmt!r}; choose one of "
                              f"{', '.join(STREAM_FORMATS)}", field="format")
        if socket is not None:
            host, sep, port_text = socket.rpartition(":")
            if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ConfigError(f"--socket wants HOST:PORT, got {socket!r}", field="socket")
            if fmt != "jsonl":
                raise ConfigError("a socket carries JSON lines only", field="format")
        delivery = _delivery_sinks(webhook, deliver_dir, deliver_broker)
        sch = load_schema(schema)
        subs = SubscriptionSet(sch, profile_source(profiles), engine=engine)
        spark = _session(config, master, shuffle_partitions, driver_memory, out)
        pipe = Pipeline(spark, sch, subs, [*streaming_sinks(out), *delivery])

        def on_batch(r: BatchReport) -> None:
            typer.echo(f"batch {r.batch_id}: {r.events} events, {r.bad} bad, "
                       f"{r.notifications} notifications, {r.profiles} profiles "
                       f"(v{r.version}), {r.seconds:.2f}s, {r.jobs} Spark "
                       f"job{'' if r.jobs == 1 else 's'}", err=False)

        ck = checkpoint or out / "_checkpoint"
        if socket is not None:
            frame = socket_stream(spark, host.strip("[]"), int(port_text))
            what = f"socket {socket}"
        else:
            assert watch is not None
            frame = watch_directory(spark, watch, max_files_per_trigger=max_files, fmt=fmt)
            what = str(watch)
        q = pipe.stream(frame, ck, trigger_seconds=trigger, available_now=available_now,
                        on_batch=on_batch, per_batch_sources=socket is not None,
                        kind="xml" if fmt == "xml" else "text")
        typer.echo(f"reading {what} -> {out} (checkpoint {ck}); Ctrl-C stops", err=True)
        try:
            if run_until_idle(q, pipe.activity, idle_stop):
                typer.echo(f"idle for {idle_stop:g}s (no batch running, no new data): "
                           "stopping", err=True)
            exc = q.exception()
            if exc is not None:
                typer.echo(f"siftbus: error: the streaming query failed: "
                           f"{str(exc).strip().splitlines()[0]}", err=True)
                raise typer.Exit(1)
        except KeyboardInterrupt:
            stop_spark_now("stopped")  # the checkpoint keeps what was committed
        finally:
            pipe.close()
