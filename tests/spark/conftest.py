"""Fixtures the Spark tests share: ONE SparkSession per test session (the JVM start is
slow), small shuffle partitions, no UI; and the small schema as a file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from siftbus.errors import EnvironmentProblem

from .jobs import SCHEMA_TOML


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The one SparkSession of the test run (local[2])."""
    from siftbus.spark.session import SparkSettings, build_session

    try:
        session = build_session(SparkSettings(master="local[2]", app_name="siftbus-tests",
                                              shuffle_partitions=4, arrow_batch_rows=4096))
    except EnvironmentProblem as exc:
        pytest.skip(f"Spark unavailable: {exc}")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small schema with every domain kind, as a file."""
    p = tmp_path_factory.mktemp("schema") / "schema.toml"
    p.write_text(SCHEMA_TOML, encoding="utf-8")
    return p
