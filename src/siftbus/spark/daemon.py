"""PySpark's worker daemon, with the pipeline's code loaded before it forks a worker.

Spark starts one daemon per executor (``python -m`` the module named by
``spark.python.daemon.module``), and the daemon forks a Python worker for each task slot.
A forked worker starts from the daemon's memory. With PySpark's own daemon, each worker
first imports the pipeline (pyarrow, numpy, the parse and match stages) and loads the
compiled matching kernels: about 2 s of CPU, 8-16 s on a loaded two-core machine, and a
streaming micro-batch that needs a new worker waits for all of it (issue 33, target 4:
the second worker of ``local[2]`` made a 2,000-event batch take 16 s, and the stream fell
behind for good). This daemon does that work once, before its first fork (:func:`warm`
runs a small synthetic batch through :func:`siftbus.spark.fused.iter_fused`), so every
worker starts warm. A warm-up that fails changes nothing: the workers then load what they
need themselves, as with PySpark's daemon.

It also imports PySpark from its installed package rather than from the zip files Spark
puts first on the workers' path, where the package is also installed (:func:`unzip_path`):
a worker calls ``importlib.invalidate_caches()`` before every task, and on Python 3.11
that re-reads the directory of every zip or jar an import has looked into (PySpark's zip,
1,220 files, once per package imported from it; Spark's core jar, 21,000 files). A trivial
one-task job took 0.49 s instead of 0.35 s at load 16 (means of 30 jobs; 15 ms more CPU).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from importlib.machinery import PathFinder
from pathlib import Path

_SCHEMA = """
[Warm]
a = "int[0,1000]"
b = "decimal[-40,60,1]"
c = "enum[X,Y,Z]"
s = "string"
"""

WARM_EVENTS = 256
"""Events of the warm-up batch: more than the kernels' ``auto`` rule lets the Python
kernels take (:data:`siftbus.match.kernel.AUTO_ROWS`), so that numba is loaded."""


def warm() -> None:
    """Parse, match and write a small synthetic batch through the fused path."""
    import pyarrow as pa

    from siftbus.lang.profile import parse_profile
    from siftbus.model.schema import parse_schema
    from siftbus.spark.fused import TaskPlan, iter_fused
    from siftbus.spark.match_stage import build_plan

    schema = parse_schema(_SCHEMA, source="<worker warm-up>")
    texts = ["Warm(a >= 10, a <= 500, b > 1)", "Warm(c = Y)", 'Warm(s = "k1")', "Warm()"]
    profiles = [parse_profile(t, schema, id=f"w{i}").with_id(f"w{i}", f"s{i % 2}")
                for i, t in enumerate(texts)]
    plan = build_plan(schema, profiles)
    lines = [json.dumps({"type": "Warm", "a": (i * 37) % 1000, "b": i % 100 - 40,
                         "c": "XYZ"[i % 3], "s": f"k{i % 3}"}).encode()
             for i in range(WARM_EVENTS)]
    n = len(lines)
    batch = pa.RecordBatch.from_arrays([
        pa.array(["warm"] * n, pa.string()), pa.array(range(1, n + 1), pa.int64()),
        pa.array([0] * n, pa.int64()), pa.array(lines, pa.binary())],
        names=["source", "line", "events_before", "text"])
    scratch = tempfile.mkdtemp(prefix="siftbus-warm-")
    try:
        task = TaskPlan(parquet=f"{scratch}/pq", jsonl=scratch, with_source=True, batch_id=0,
                        deliver=True)
        for _ in iter_fused(plan, task, plan.schema_text, "text", iter([batch])):
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


ZIPPED = ("pyspark", "py4j")
"""The packages Spark puts on the workers' path as zip files (with Spark's core jar)."""


def unzip_path(path: list[str]) -> list[str]:
    """``path`` without Spark's archives (the zip files of :data:`ZIPPED` and the
    ``spark-core`` jar) when every package of :data:`ZIPPED` can be found in the rest of it;
    else ``path`` as it is (PySpark only in its zip, as in a Spark distribution)."""
    archives = [p for p in path if p.endswith((".zip", ".jar"))
                and Path(p).name.startswith((*ZIPPED, "spark-core"))]
    rest = [p for p in path if p not in archives]
    if archives and all(PathFinder.find_spec(m, rest) is not None for m in ZIPPED):
        return rest
    return path


def _forget(archives: tuple[str, ...]) -> None:
    """Drop the import system's entries for ``archives``: their importers, and the
    namespace packages found in them (the standard library's ``copy`` imports
    ``org.python.core``, which Spark's core jar holds as a directory)."""
    for key in [k for k in sys.path_importer_cache if k.startswith(archives)]:
        del sys.path_importer_cache[key]
    for name, module in list(sys.modules.items()):
        where = [*getattr(module, "__path__", ()), getattr(module, "__file__", None)]
        found = [w for w in where if w]
        if found and all(str(w).startswith(archives) for w in found):
            del sys.modules[name]


def main() -> None:
    """Warm up, then serve as PySpark's daemon (which reads its arguments itself)."""
    if "pyspark" not in sys.modules:  # a package imported from a zip stays there
        kept = unzip_path(sys.path)
        gone = tuple(set(sys.path) - set(kept))
        if gone:
            _forget(gone)
            sys.path[:] = kept
    # The daemon tells the JVM its port on stdout: nothing else may be written there.
    with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(Exception):
        warm()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
