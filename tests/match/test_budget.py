"""The index's memory budget: a profile set that would pass it is refused with one clear
error naming the budget and the size needed, never an out-of-memory kill or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from siftbus.errors import CapacityError, ConfigError
from siftbus.match import budget
from siftbus.match.columns import ProfileColumns
from siftbus.match.index import IndexMatcher
from siftbus.model import IntDomain, Op, Predicate, Profile
from siftbus.model.schema import Attribute, EventType

ROOT = Path(__file__).resolve().parents[2]
ATTRS = 20
ETYPE = EventType("R", tuple(Attribute(f"a{i}", IntDomain(0, 999_999), i)
                             for i in range(ATTRS)))


def _profiles(n: int, seed: int = 3) -> list[Profile]:
    rnd = np.random.default_rng(seed)
    return [Profile.build(f"s{i:06d}", ETYPE, [
        Predicate(f"a{a}", Op.RANGE, (int(x), int(x) + 500_000))
        for a, x in zip(rnd.choice(ATTRS, 10, replace=False), rnd.integers(0, 500_000, 10),
                        strict=True)]) for i in range(n)]


def test_parse_and_default() -> None:
    assert budget.parse("512M") == 512 << 20
    assert budget.parse("1.5G") == 3 << 29
    assert budget.parse("4096") == 4096
    assert budget.parse("none") is None and budget.parse("0") is None
    with pytest.raises(ConfigError, match="SIFTBUS_INDEX_BUDGET"):
        budget.parse("lots")
    assert (budget.default() or 0) > 0


def test_refused_with_budget_and_size_and_nothing_added() -> None:
    profiles = _profiles(50)
    cols = ProfileColumns.from_profiles(ETYPE, profiles)
    need = budget.cost(50, 500)
    m = IndexMatcher(budget=need - 1)
    with pytest.raises(CapacityError) as err:
        m.add_columns(cols)
    text = str(err.value)
    assert "memory budget of" in text and budget.size(need - 1) in text
    assert budget.size(need) in text and "SIFTBUS_INDEX_BUDGET" in text
    assert len(m) == 0
    m = IndexMatcher(budget=need)
    m.add_columns(ProfileColumns.from_profiles(ETYPE, profiles[:49]))
    m.add(profiles[49])
    extra = profiles[0].with_id("extra")
    with pytest.raises(CapacityError):  # one profile too many, added one at a time
        m.add(extra)
    assert "extra" not in m and len(m) == 50
    m.remove(profiles[0].id)  # removing makes room
    m.add(extra)
    assert "extra" in m


def _write(tmp: Path, n: int) -> tuple[Path, Path, Path]:
    schema = tmp / "schema.toml"
    schema.write_text("[R]\n" + "".join(f'a{i} = "int[0,999999]"\n' for i in range(ATTRS)))
    rnd = np.random.default_rng(1)
    lo = rnd.integers(0, 500_000, (n, ATTRS))
    rows = [f"s{i}: R(" + ", ".join(f"a{a} in [{x}, {x + 500000}]" for a, x in enumerate(r))
            + ")" for i, r in enumerate(lo.tolist())]
    profiles = tmp / "profiles.txt"
    profiles.write_text("\n".join(rows) + "\n")
    events = tmp / "events.jsonl"
    events.write_text('{"type": "R", ' + ", ".join(f'"a{i}": 7' for i in range(ATTRS)) + "}\n")
    return schema, profiles, events


def test_cli_refuses_over_the_budget_in_one_line(tmp_path: Path) -> None:
    schema, profiles, events = _write(tmp_path, 200)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SIFTBUS_INDEX_BUDGET="64K",
               SIFTBUS_KERNELS="python")
    r = subprocess.run([sys.executable, "-m", "siftbus", "match", "--schema", str(schema),
                        "--profiles", str(profiles), "--events", str(events)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("siftbus: error: the profile index would need about")
    assert "memory budget of 64.0 KB" in r.stderr


def test_cli_under_an_address_space_limit_says_one_line(tmp_path: Path) -> None:
    """``siftbus match`` with 48 MB of address space left after start-up (numba loaded)
    and 12,000 profiles of 20 conditions: refused by the budget or, where the file's
    own reading runs out first, by the out-of-memory line; one line and exit 2, never a
    traceback."""
    schema, profiles, events = _write(tmp_path, 12_000)
    code = (
        "import resource, sys\n"
        "from siftbus.cli import main\n"
        "from siftbus.match import kernel, ingest, scan_numba, events_numba\n"
        "kernel.use('numba')\n"
        "import siftbus.match.kernel_numba\n"
        "with open('/proc/self/statm') as f:\n"
        "    mapped = int(f.read().split()[0]) * resource.getpagesize()\n"
        "limit = mapped + (48 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        f"sys.argv = ['siftbus', 'match', '--schema', {str(schema)!r}, '--profiles', "
        f"{str(profiles)!r}, '--events', {str(events)!r}]\n"
        "main()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), SIFTBUS_KERNELS="numba")
    env.pop(budget.ENV, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith(("siftbus: error: the profile index would need",
                                "siftbus: error: out of memory"))


def test_default_budget_is_half_the_address_space_left() -> None:
    code = (
        "import resource\n"
        "from siftbus.match import budget\n"
        "with open('/proc/self/statm') as f:\n"
        "    mapped = int(f.read().split()[0]) * resource.getpagesize()\n"
        "resource.setrlimit(resource.RLIMIT_AS, (mapped + (256 << 20), resource.RLIM_INFINITY))\n"
        "print(budget.default() >> 20)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop(budget.ENV, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert 100 <= int(r.stdout) <= 128
