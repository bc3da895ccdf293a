"""The kernel interface: the environment variable, the auto rule, and one index matched by
both implementations."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from siftbus.match import kernel
from siftbus.match.cells import column_cells
from siftbus.match.conformance import _hot, random_event, random_profile, random_type
from siftbus.match.index import IndexMatcher, compile_type, events_to_columns


def test_environment_variable_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    code = ("import sys\nfrom siftbus.match import kernel\nfrom siftbus.match.index import "
            "IndexMatcher\nfrom siftbus.lang import parse_profile\nfrom siftbus.model import "
            "parse_schema, Event\ns = parse_schema('[T]\\na = \"int[0,9]\"\\n')\n"
            "m = IndexMatcher(pending_limit=0)\nm.add(parse_profile('p: T(a > 3)', s))\n"
            "assert m.match(Event.of(s['T'], {'a': 5})) == ['p']\n"
            "print(kernel.name(), 'numba' in sys.modules)\n")
    for mode, want in [("python", "python False"), ("numba", "numba True")]:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env={"PATH": "/usr/bin:/bin", kernel.ENV: mode})
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", kernel.ENV: "fortran"})
    assert r.returncode != 0 and "SIFTBUS_KERNELS='fortran': choose one of auto" in r.stderr


def test_auto_moves_to_numba_on_a_big_batch_or_after_its_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = __import__("random").Random(5)
    t = random_type(rnd, max_attrs=4)
    hot = _hot(rnd, t)
    profiles = sorted((p for i in range(40) if (p := random_profile(rnd, t, f"p{i}", hot))),
                      key=lambda p: p.id)
    ct = compile_type(t, profiles)
    evs = [random_event(rnd, t, hot) for _ in range(kernel.AUTO_ROWS + 1)]
    cells = column_cells(ct.cells, events_to_columns(t, evs), len(evs))
    try:
        kernel.use("auto")
        assert kernel.name() == "python"
        small = ct.run(cells[:3])
        assert kernel.name() == "python"
        big = ct.run(cells)
        assert kernel.name() == "numba"
        assert np.array_equal(big[0][:4], small[0]) and np.array_equal(
            big[1][:small[0][-1]], small[1])
        kernel.use("auto")
        monkeypatch.setattr(kernel, "AUTO_BUDGET", 0.0)
        ct.run(cells[:3])
        assert kernel.name() == "numba"
    finally:
        kernel.use()


def test_both_implementations_give_the_same_csr() -> None:
    rnd = __import__("random").Random(9)
    t = random_type(rnd)
    hot = _hot(rnd, t)
    m = IndexMatcher(1 / 32, pending_limit=0)
    for i in range(300):
        p = random_profile(rnd, t, f"p{i}", hot)
        if p is not None:
            m.add(p)
    snap = m.snapshot()
    cols = events_to_columns(t, [random_event(rnd, t, hot) for _ in range(200)])
    got = {}
    try:
        for mode in ("numba", "python"):
            kernel.use(mode)
            csr = snap.match_columns(t.name, cols)
            got[mode] = (csr.offsets.tolist(), csr.profiles.tolist())
    finally:
        kernel.use()
    assert got["numba"] == got["python"]
