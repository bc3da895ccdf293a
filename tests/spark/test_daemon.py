"""The workers' daemon (``siftbus.spark.daemon``): workers start with the pipeline loaded,
and PySpark imported from its installed package, not from Spark's zip and jar."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from siftbus.spark.daemon import unzip_path


def test_spark_archives_leave_the_path_only_when_the_packages_are_installed(
        tmp_path: Path) -> None:
    lib = tmp_path / "spark" / "python" / "lib"
    zips = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"),
            str(tmp_path / "jars" / "spark-core_2.13-4.0.5.jar")]
    other = str(tmp_path / "mine.zip")
    site = tmp_path / "site"
    (site / "pyspark").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    path = [*zips, other, str(tmp_path / "src")]
    # PySpark alone is installed: py4j is only in its zip, so nothing may go
    assert unzip_path([*path, str(site)]) == [*path, str(site)]
    (site / "py4j").mkdir()
    (site / "py4j" / "__init__.py").write_text("")
    assert unzip_path([*path, str(site)]) == [other, str(tmp_path / "src"), str(site)]
    assert unzip_path([other, str(site)]) == [other, str(site)]


@pytest.mark.spark
def test_workers_start_warm_with_pyspark_from_its_package(spark: Any) -> None:
    import pyspark

    def where(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # defined here: a worker unpickles it by value (the tests are no package it has)
        import sys

        import pyspark

        from siftbus.match import kernel

        preloaded = "siftbus.spark.fused" in sys.modules
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{
            "pyspark": pyspark.__file__, "fused": preloaded, "kernels": kernel.name(),
            "archives": sum(p.endswith((".zip", ".jar")) and "spark" in p
                            for p in sys.path)}])

    rows = spark.range(0, 4, numPartitions=2).mapInArrow(
        where, "pyspark string, fused boolean, kernels string, archives long").collect()
    installed = str(Path(pyspark.__file__).parent)
    for r in rows:
        assert r["pyspark"].startswith(installed) and ".zip" not in r["pyspark"]
        assert r["fused"] and r["kernels"] == "numba" and r["archives"] == 0
