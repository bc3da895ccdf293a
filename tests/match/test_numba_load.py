"""Kernels loaded from numba's cache without the context refresh, the extension scan and
the imports numba makes for features siftbus does not use (``match/numba_load.py``):
a kernel compiled in one process (a cold cache: numba compiles as usual) gives the same
result when a second process loads it from the cache, and that process neither
refreshes numba's contexts nor imports PyYAML, ``importlib.metadata`` or the numba
modules whose code the kernel inlined (an error raised by that code reads as before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

KERNEL = '''
import numpy as np

from siftbus.match.numba_load import njit


@njit(cache=True, inline="always")
def _twice(x):
    return 2 * x


@njit(cache=True)
def kernel(a, k):
    out = np.empty(a.shape[0] + 1, np.int64)  # the runtime (NRT) allocates it
    s = 0
    for i in range(a.shape[0]):
        s += _twice(a[i]) % k
        out[i] = s
    out[-1] = np.sort(a)[0]
    return out


@njit(cache=True)
def empty(n):
    return np.empty(n, np.int64)  # numba raises ValueError from numba.np.arrayobj's code
'''

RUN = '''
import json, sys
import numpy as np
import kern  # first: it imports numba (through siftbus.match.numba_load)
from numba.core import base, entrypoints
refreshed = []
full = base.BaseContext.refresh
base.BaseContext.refresh = lambda self: (refreshed.append(1), full(self))[1]
out = kern.kernel(np.arange(5, 0, -1, dtype=np.int64), 7)
try:
    kern.empty(-1)
    error = ""
except ValueError as exc:
    error = str(exc)
print(json.dumps({
    "out": out.tolist(), "hits": sum(kern.kernel.stats.cache_hits.values()),
    "refreshed": len(refreshed), "extensions": entrypoints._already_initialized,
    "yaml": "yaml" in sys.modules, "email": "email" in sys.modules, "error": error,
    "arrayobj": "numba.np.arrayobj" in sys.modules}))
'''


def _run(where: Path) -> dict[str, object]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(where / "cache"),
           "PYTHONPATH": os.pathsep.join([str(where), *sys.path])}
    done = subprocess.run([sys.executable, "-c", RUN], cwd=where, env=env, check=True,
                          capture_output=True, text=True, timeout=300)
    got: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


def test_a_cached_kernel_loads_without_the_refresh_and_gives_the_same_result(
        tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    expected = [3, 4, 10, 14, 16, 1]  # 2x mod 7 of 5, 4, 3, 2, 1, summed; the minimum
    cold = _run(tmp_path)
    assert cold["out"] == expected
    assert cold["hits"] == 0 and cold["refreshed"] > 0  # compiled as numba does
    warm = _run(tmp_path)
    assert warm["out"] == expected
    assert warm["hits"] == 1
    assert cold["error"] == "negative dimensions not allowed"
    assert warm == {"out": expected, "hits": 1, "refreshed": 0, "extensions": False,
                    "yaml": False, "email": False, "arrayobj": False,
                    "error": "negative dimensions not allowed"}
