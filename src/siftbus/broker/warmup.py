"""Loading the compiled matching kernels without stopping a broker.

The first large batch a broker matches used to load numba in the middle of serving: about
a second with its on-disk cache, 10-20 s on a loaded machine when it had to compile (a
new installation, changed sources), a time in which no other client's PUB, PING or TLS
handshake was answered (issue 30, item 5). :func:`load_kernels`, called at the broker's
start, has that load made in a thread when it is wanted
(:func:`siftbus.match.kernel.load_later`); the thread matches a small synthetic table
through the paths a broker takes (the levelled ``match_batch``, the snapshot's columnar
``match_columns``, single events), so that the kernels those need are compiled or
loaded from the cache there, while the Python kernels serve (the same matches, slower).
"""

from __future__ import annotations

import numpy as np

from siftbus.lang.profile import parse_profile
from siftbus.match import kernel
from siftbus.match.base import Snapshotting
from siftbus.match.engines import make_matcher
from siftbus.model.event import event_from_dict
from siftbus.model.schema import parse_schema
from siftbus.wire.events import Block

_SCHEMA = """
[Warm]
a = "int[0,1000]"
b = "decimal[-40,60,1]"
c = "enum[X,Y,Z]"
s = "string"

[Flat]
x = "int[0,100]"
y = "int[0,100]"
"""


def _profiles() -> list[tuple[str, str]]:
    out = []
    for i in range(48):
        out.append((f"w{i}", f"Warm(a >= {i * 20}, a <= {i * 20 + 15}, b > {i % 50 - 20})"))
        out.append((f"v{i}", f"Warm(c = {'XYZ'[i % 3]}, s = \"k{i % 7}\")"))
        out.append((f"f{i}", f"Flat(x >= {i}, y <= {100 - i})"))
    out += [("all", "Warm()"), ("wide", "Flat(x >= 0, x <= 100)")]
    return out


def warm(engine: str) -> None:
    """Match a small synthetic table with ``engine`` through every path a broker uses."""
    schema = parse_schema(_SCHEMA, source="<kernel warm-up>")
    m = make_matcher(engine)
    for pid, text in _profiles():
        m.add(parse_profile(text, schema, id=pid))
    warm_rows = [event_from_dict({"type": "Warm", "a": (i * 37) % 1000, "b": i % 100 - 40,
                                  "c": "XYZ"[i % 3], "s": f"k{i % 9}"}, schema)
                 for i in range(300)]
    flat_rows = [event_from_dict({"type": "Flat", "x": i % 101, "y": (i * 7) % 101}, schema)
                 for i in range(300)]
    for rows in (warm_rows, flat_rows):
        for n in (1, 8, len(rows)):
            m.match_batch(rows[:n])
        m.match(rows[0])
        if isinstance(m, Snapshotting):
            snap = m.snapshot()
            for n in (1, len(rows)):
                block = Block.of_events(rows[:n], "warm", np.arange(n, dtype=np.int64),
                                        np.zeros(n))
                snap.match_columns(rows[0].etype.name, block.columns())


def load_kernels(engine: str) -> None:
    """Have the compiled kernels loaded in the background when they are wanted, warmed
    for ``engine`` (nothing changes when the process is already on them or chose its
    kernels with ``SIFTBUS_KERNELS``)."""
    kernel.load_later(lambda: warm(engine))


__all__ = ["load_kernels", "warm"]
