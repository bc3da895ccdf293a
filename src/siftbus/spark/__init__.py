"""The PySpark bulk pipeline: sources, parsing, the match stage, sinks, workloads, analysis.

Importing this package does not import pyspark; each module imports what it needs, so the
CLI stays fast and the pure helpers (parsing, the match kernel) are usable without a JVM.
"""

from siftbus.errors import require_extra

require_extra("spark", "the Spark pipeline", "pyspark", "pyarrow", "pandas")
