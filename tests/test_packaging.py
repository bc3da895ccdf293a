"""The wheel a user installs: built from the shipped files, installed in a clean venv with
only its base dependencies, it runs ``siftbus --version``, a match and a one-broker
publish/subscribe; the optional parts say which extra they need, in one line.

Offline and bounded: the base dependencies are not downloaded but linked from this
environment's installed distributions (exactly the closure of the wheel's base
``Requires-Dist``, nothing else), so the venv sees no fastapi, pyspark, lxml or
matplotlib.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
BUILDING = ROOT / "examples" / "building"
OPTIONAL = {"fastapi", "pyspark", "lxml", "matplotlib", "pandas", "pyarrow", "pytest"}


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _build_wheel(tmp: Path) -> Path:
    src = tmp / "src-copy"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in files:
        if name and (ROOT / name).is_file() and not name.startswith(("tests/", "bench/")):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    dist = tmp / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr
    (wheel,) = dist.glob("siftbus-*.whl")
    return wheel


def _requires(wheel: Path) -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    base: list[Requirement] = []
    extras: dict[str, list[Requirement]] = {}
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            m = re.search(r'extra == "([^"]+)"', str(req.marker or ""))
            if m:
                extras.setdefault(m.group(1), []).append(req)
            elif req.marker is None or req.marker.evaluate():
                base.append(req)
    return base, extras


def _closure(reqs: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions ``reqs`` need, transitively (markers evaluated)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(reqs)
    while todo:
        req = todo.pop()
        key = _canon(req.name)
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[key] = dist
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
    return list(seen.values())


def _link_into(venv: Path, dists: list[metadata.Distribution]) -> None:
    (site,) = venv.glob("lib/python*/site-packages")
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops:
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            target = site / top
            if not target.exists() and (base / top).exists():
                target.symlink_to(base / top)


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(tmp)
    base, extras = _requires(wheel)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    _link_into(venv, _closure(base))
    # the wheel itself, as pip installs it (console script included), with no index
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    names = {k: [_canon(q.name) for q in v] for k, v in extras.items()}
    names["base"] = [_canon(q.name) for q in base]
    return venv, names


def _run(venv: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "siftbus"), *args], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=venv.parent,
                          env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(venv)})


def test_base_install_has_no_optional_part(clean_venv: tuple[Path, dict[str, list[str]]]
                                           ) -> None:
    venv, names = clean_venv
    assert not OPTIONAL & set(names["base"]), names["base"]
    assert {"spark", "gateway", "xml", "plots", "dev"} <= set(names)
    assert "pyspark" in names["spark"] and "fastapi" in names["gateway"]
    assert "lxml" in names["xml"] and "matplotlib" in names["plots"]
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import fastapi"],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode != 0  # really clean: the dev environment does not leak in


def test_version_and_a_match_from_the_wheel(clean_venv: tuple[Path, dict[str, list[str]]]
                                            ) -> None:
    venv, _ = clean_venv
    r = _run(venv, "--version")
    assert r.returncode == 0 and r.stdout.startswith("siftbus "), r.stderr
    r = _run(venv, "match", "--schema", str(BUILDING / "schema.toml"), "--profiles",
             str(BUILDING / "profiles.txt"), "--events", str(BUILDING / "events.jsonl"))
    assert r.returncode == 0, r.stderr
    expected = (BUILDING / "expected-matches.jsonl").read_text().splitlines()
    assert r.stdout.splitlines() == expected


def test_one_broker_publish_subscribe_from_the_wheel(
        clean_venv: tuple[Path, dict[str, list[str]]]) -> None:
    venv, _ = clean_venv
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(venv)}
    broker = subprocess.Popen([str(venv / "bin" / "siftbus"), "broker", "--schema",
                               str(BUILDING / "schema.toml"), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert broker.stdout is not None
        line = broker.stdout.readline()
        m = re.search(r"listening on (127\.0\.0\.1:\d+)", line)
        assert m, (line, broker.stderr.read() if broker.poll() is not None else "")
        at = m.group(1)
        how = [broker.stdout.readline() for _ in range(4)]  # how to connect, then Ctrl-C
        assert f"siftbus subscribe -b {at} 'Temperature()'" in how[0], how
        assert f"siftbus publish -b {at} events.jsonl" in how[1], how
        assert "Ctrl-C stops the broker" in how[3], how
        sub = subprocess.Popen([str(venv / "bin" / "siftbus"), "subscribe", "-b", at,
                                "Temperature(room = 50, value > 21)", "--count", "2",
                                "--timeout", "60"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
        assert sub.stderr is not None
        assert "subscribed" in sub.stderr.readline()
        r = _run(venv, "publish", "-b", at, str(BUILDING / "events.jsonl"))
        assert r.returncode == 0 and "published 34 event(s)" in r.stderr, r.stderr
        out, _ = sub.communicate(timeout=60)
        rooms = [line for line in out.splitlines() if '"room": 50' in line]
        assert len(rooms) == 2, out
    finally:
        broker.terminate()
        broker.wait(20)


@pytest.mark.parametrize(("args", "extra"), [
    (["gateway", "-c", str(ROOT / "examples" / "network" / "net.toml"), "-n", "B1"], "gateway"),
    (["xml-filter", "--subscriptions", str(ROOT / "examples" / "xml" / "subs.xml"),
      "--input", str(ROOT / "examples" / "xml" / "events.xml")], "xml"),
    (["pipeline", "run", "--schema", str(BUILDING / "schema.toml"), "--profiles",
      str(BUILDING / "profiles.txt"), "--events", str(BUILDING / "events.jsonl"), "--out",
      "out"], "spark"),
    (["match", "--schema", str(BUILDING / "schema.toml"), "--profiles",
      str(BUILDING / "profiles.txt"), "--events", str(BUILDING / "events.jsonl"), "--out",
      "m.parquet"], "spark"),
])
def test_an_optional_part_names_its_extra_in_one_line(
        clean_venv: tuple[Path, dict[str, list[str]]], args: list[str], extra: str) -> None:
    venv, _ = clean_venv
    r = _run(venv, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and f"pip install 'siftbus[{extra}]'" in r.stderr, \
        r.stderr
