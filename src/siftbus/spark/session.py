"""Building the SparkSession: settings from a TOML file and flags, and a clear error without Java.

A pipeline config file is TOML; the ``[spark]`` table holds the session settings::

    [spark]
    master = "local[*]"
    app_name = "siftbus"
    shuffle_partitions = 8
    driver_memory = "2g"
    arrow_batch_rows = 65536
    jvm_options = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

    [spark.conf]              # any other Spark property, passed through verbatim
    "spark.local.dir" = "/tmp/spark"

Flags given on the command line override the file; the file overrides the defaults.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from siftbus.errors import ConfigError, EnvironmentProblem
from siftbus.model.textio import read_toml

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The JVMs' default options. The JVM's own defaults (two JIT tiers, G1 with its
concurrent threads) cost 18.9 CPU-s to start Spark and run a small job; C1 alone and the
serial collector 10.5 (issue 33: the JVM is the fixed cost). The outputs are written by
the Python workers, so little hot code runs in the JVM for C2 to speed up."""


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """How to build the session. Every field has a default that works on one laptop."""

    master: str = "local[*]"
    """Spark master URL: ``local[*]``, ``local[2]``, ``spark://host:7077``."""
    app_name: str = "siftbus"
    """Application name shown by the Spark UI and the cluster master."""
    shuffle_partitions: int = 8
    """``spark.sql.shuffle.partitions``; Spark's 200 is far too many for one machine."""
    driver_memory: str | None = None
    """``spark.driver.memory`` (only effective before the JVM starts)."""
    arrow_batch_rows: int = 65536
    """Rows per Arrow batch handed to the match stage; bigger batches amortise the call."""
    jvm_options: str = JVM_OPTIONS
    """Options of the driver's and the executors' JVMs (``""``: the JVM's defaults)."""
    ui: bool = False
    """Whether to start the Spark web UI (off: it needs a port and time)."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Further Spark properties, passed through verbatim."""
    log_file: str | None = None
    """Where the JVM's own output goes (its warnings, its log at level WARN, and what
    Python workers print): appended to this file instead of the terminal. Only takes
    effect when this call starts the JVM. ``None``: the terminal, errors only."""

    def with_overrides(self, **flags: Any) -> SparkSettings:
        """A copy with every flag that is not ``None`` applied."""
        given = {k: v for k, v in flags.items() if v is not None}
        unknown = set(given) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown Spark setting(s): {', '.join(sorted(unknown))}")
        return replace(self, **given)


_FIELDS = {
    "master": str,
    "app_name": str,
    "shuffle_partitions": int,
    "driver_memory": str,
    "arrow_batch_rows": int,
    "jvm_options": str,
    "ui": bool,
    "log_file": str,
}


def settings_from_mapping(table: Mapping[str, Any], *, source: str | None = None) -> SparkSettings:
    """Settings from the ``[spark]`` table of a config file; errors name the key."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "conf":
            if not isinstance(value, Mapping):
                raise ConfigError("[spark.conf] must be a table of properties", source=source,
                                  field="conf")
            values["conf"] = {str(k): str(v) for k, v in value.items()}
            continue
        kind = _FIELDS.get(key)
        if kind is None:
            raise ConfigError(f"unknown key spark.{key} (known: {', '.join([*_FIELDS, 'conf'])})",
                              source=source, field=key)
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"spark.{key} must be an integer", source=source, field=key)
        if not isinstance(value, kind):
            raise ConfigError(f"spark.{key} must be a {kind.__name__}", source=source, field=key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ConfigError(f"spark.{key} must be at least 1", source=source, field=key)
        if key == "jvm_options" and "'" in str(value):
            # The driver's options go through a shell-quoted command line.
            raise ConfigError("spark.jvm_options cannot hold a single quote", source=source,
                              field=key)
        values[key] = value
    return SparkSettings(**values)


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a pipeline TOML config file; errors carry the file, line and column."""
    return read_toml(path, kind=ConfigError)  # strict UTF-8, bounded nesting, located


def load_settings(path: str | Path | None) -> SparkSettings:
    """Settings from the ``[spark]`` table of a config file, or the defaults."""
    if path is None:
        return SparkSettings()
    data = load_config(path)
    table = data.get("spark", {})
    if not isinstance(table, Mapping):
        raise ConfigError("[spark] must be a table", source=str(path), field="spark")
    return settings_from_mapping(table, source=str(path))


def find_java() -> str:
    """The ``java`` executable Spark will use; :class:`EnvironmentProblem` when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise EnvironmentProblem(
            f"JAVA_HOME is set to {home!r} but {candidate} is not an executable; "
            "point JAVA_HOME at a Java 17 or 21 installation or unset it")
    found = shutil.which("java")
    if found is None:
        raise EnvironmentProblem(
            "Spark needs Java 17 or 21 but no `java` is on PATH and JAVA_HOME is unset; "
            "install one (Debian: apt-get install openjdk-17-jre-headless, or `make sysdeps`)")
    return found


def java_version(java: str) -> str:
    """The first line of ``java -version``, for messages."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot run {java}: {exc}") from None
    text = (out.stderr or out.stdout).strip().splitlines()
    return text[0] if text else "unknown"


def build_session(settings: SparkSettings | None = None) -> SparkSession:
    """Start (or join) the SparkSession described by ``settings``.

    Raises :class:`EnvironmentProblem` when Java is missing or the JVM does not start.
    """
    settings = settings or SparkSettings()
    if "'" in settings.jvm_options:
        raise ConfigError("spark.jvm_options cannot hold a single quote", field="jvm_options")
    find_java()
    # Executors must run the same interpreter (and so see the same siftbus) as the driver,
    # also on a standalone cluster whose workers were started from another environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Stay on loopback (the machine's name may resolve elsewhere) and keep the JVM quiet.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_conf = _quiet_log4j("warn" if settings.log_file else "error")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # Driver JVM options only take effect on the command line that starts the JVM.
        args = [f"--driver-java-options '-Dlog4j.configurationFile={log_conf} "
                f"{settings.jvm_options}'"]
        if settings.driver_memory:
            args.append(f"--driver-memory {settings.driver_memory}")
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join([*args, "pyspark-shell"])
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(settings.master)
        .appName(settings.app_name)
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.default.parallelism", str(settings.shuffle_partitions))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(settings.arrow_batch_rows))
        .config("spark.ui.enabled", "true" if settings.ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONHASHSEED", "0")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions",
                f"-Dlog4j.configurationFile={log_conf} {settings.jvm_options}")
        .config("spark.executor.extraJavaOptions",
                f"-Dlog4j.configurationFile={log_conf} {settings.jvm_options}")
    )
    if settings.driver_memory:
        builder = builder.config("spark.driver.memory", settings.driver_memory)
    if settings.master.startswith("local"):
        # Spark lists more than 32 paths with a job of its own (a streaming micro-batch of
        # 36 new files: 36 tasks); on one machine the driver lists them faster itself.
        builder = builder.config("spark.sql.sources.parallelPartitionDiscovery.threshold",
                                 "100000")
        # Workers forked from a daemon that has loaded the pipeline: a new worker starts
        # warm, not seconds late (siftbus.spark.daemon). Only where the workers run this
        # very installation: a cluster's executors may hold another siftbus, and a daemon
        # that cannot start fails every task (set the property in [spark.conf] there).
        builder = builder.config("spark.python.daemon.module", "siftbus.spark.daemon")
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    from pyspark import SparkContext

    starts_jvm = SparkContext._gateway is None
    log = Path(settings.log_file) if settings.log_file and starts_jvm else None
    try:
        with _output_to(log):
            spark = builder.getOrCreate()
    except Exception as exc:  # pyspark raises its own error types for a JVM that died
        where = f" (Spark's messages: {log})" if log else ""
        raise EnvironmentProblem(f"Spark did not start (master {settings.master}): "
                                 f"{_first_line(exc)}{where}") from None
    spark.sparkContext.setLogLevel("WARN" if log else "ERROR")
    return spark


@contextmanager
def _output_to(path: Path | None) -> Iterator[None]:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at ``path`` while
    the block runs. The JVM started inside inherits them for good (and so do the Python
    workers it starts), so its messages land in the file; ours come back afterwards."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j(level: str = "error") -> str:
    """A log4j2 config that prints ``level`` and above (Spark's default prints pages of
    INFO/WARN)."""
    d = Path(tempfile.gettempdir()) / f"siftbus-{os.getuid()}"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"log4j2-{level}.properties"
    text = _LOG4J.replace("{level}", level)
    if not path.is_file() or path.read_text() != text:
        tmp = d / f"log4j2.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)
    return str(path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def executor_writes(spark: SparkSession) -> bool:
    """Whether the Python workers read the JSON-lines files (:mod:`siftbus.spark.ranges`)
    and write the standard outputs (:mod:`siftbus.spark.fused`) themselves.

    ``spark.siftbus.executorWrites`` = ``true``, ``false`` or ``auto`` (the default: yes
    when every executor shares the driver's filesystem, that is on ``local`` masters and
    on a standalone master at a loopback address)."""
    value = str(spark.conf.get("spark.siftbus.executorWrites", "auto")).strip().lower()
    if value in ("true", "false"):
        return value == "true"
    if value != "auto":
        raise ConfigError(f"spark.siftbus.executorWrites must be true, false or auto, not "
                          f"{value!r}", field="spark.siftbus.executorWrites")
    master = str(spark.sparkContext.master or "")
    if master.startswith("local"):
        return True
    host = master.removeprefix("spark://").split(":")[0]
    return host in ("127.0.0.1", "localhost", "::1", "[::1]")


def task_slots(spark: SparkSession) -> int:
    """How many tasks run at once: N of ``local[N]`` (``local[*]``: this machine's cores,
    ``local``: one), else Spark's default parallelism."""
    master = str(spark.sparkContext.master or "")
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master)
    if m is None:
        return max(1, int(spark.sparkContext.defaultParallelism))
    if m[1] is None:
        return 1
    return (os.cpu_count() or 1) if m[1] == "*" else max(1, int(m[1]))


__all__ = [
    "SparkSettings",
    "build_session",
    "executor_writes",
    "find_java",
    "java_version",
    "load_config",
    "load_settings",
    "settings_from_mapping",
    "task_slots",
]
