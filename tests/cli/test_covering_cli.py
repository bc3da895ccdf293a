"""``siftbus covering relation|show|query`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from siftbus.cli import app

ROOT = Path(__file__).resolve().parents[2]
BUILDING = ROOT / "examples" / "building"
SCHEMA = str(BUILDING / "schema.toml")
runner = CliRunner()


def run(*args: str) -> str:
    r = runner.invoke(app, ["covering", *args])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize(("p", "q", "want", "merged"), [
    ("OutdoorTemp(value > 20)", "OutdoorTemp(value in [25, 30])", "covers",
     "OutdoorTemp(value > 20.0)"),
    ("OutdoorTemp(value in {58.1, 58.2})", "OutdoorTemp(value > 58)", "covered-by",
     "OutdoorTemp(value > 58.0)"),
    ("x: OutdoorTemp(value > 59.8)", "y: OutdoorTemp(value in {59.9, 60})", "equivalent",
     "OutdoorTemp(value > 59.8)"),
    ("Temperature(room = 1, value > 21.0)", "Temperature(room = 2, value > 21.0)",
     "disjoint", "Temperature(room < 3, value > 21.0)"),
    ("Temperature(room = 1, value > 21.0)", "Temperature(room = 3, value > 22.0)",
     "disjoint", None),
    ("Temperature(room in [1, 5])", "Temperature(room in [3, 9], value > 0)", "overlaps",
     None),
])
def test_relation(p: str, q: str, want: str, merged: str | None) -> None:
    lines = run("relation", "--schema", SCHEMA, p, q).splitlines()
    assert lines[0] == want
    assert lines[1] == (f"perfect merge: {merged}" if merged else "no perfect merge")


def test_relation_imperfect_merge_is_printed_on_request() -> None:
    out = run("relation", "--imperfect", "--schema", SCHEMA,
              "Temperature(room = 1, value > 21.0)", "Temperature(room = 3, value > 22.0)")
    assert out.splitlines()[2] == ("imperfect merge: "
                                   "Temperature(room < 4, room != 2, value > 21.0)")


@pytest.mark.parametrize("structure", ["poset", "forest"])
def test_show_json_and_dot(structure: str, tmp_path: Path) -> None:
    data = json.loads(run("show", str(BUILDING / "profiles.txt"), "--schema", SCHEMA,
                          "--structure", structure))
    assert data["structure"] == structure
    by_node = {n["node"]: n for n in data["nodes"]}
    assert sum(len(n["profiles"]) for n in data["nodes"]) == data["profiles"]
    outdoor = [n for n in data["nodes"] if n["filter"] == "OutdoorTemp(value > 20.0)"]
    assert len(outdoor) == 1 and len(outdoor[0]["profiles"]) > 50  # one node, many heaters
    for upper, lower in data["edges"]:
        assert upper in by_node and lower in by_node
    assert set(data["roots"]) == {n["node"] for n in data["nodes"] if n["root"]}
    out = tmp_path / "t.dot"
    run("show", str(BUILDING / "profiles.txt"), "--schema", SCHEMA, "--structure",
        structure, "--format", "dot", "-o", str(out))
    dot = out.read_text()
    assert dot.startswith(f"digraph {structure} {{") and dot.rstrip().endswith("}")
    assert dot.count(" -> ") == len(data["edges"])


def test_query() -> None:
    data = json.loads(run("query", str(BUILDING / "profiles.txt"), "--schema", SCHEMA,
                          "OutdoorTemp(value > 25)"))
    assert "heater-r1" in data["covering"] and data["covered"] == []
    assert data["equivalent"] == []


def test_bad_profile_is_one_clear_line_and_exit_2() -> None:
    r = subprocess.run([sys.executable, "-m", "siftbus", "covering", "relation", "--schema",
                        SCHEMA, "Temperature(vlue > 1)", "Temperature(room = 1)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "vlue" in r.stderr and "column" in r.stderr


def test_forward_prints_what_each_neighbour_holds(tmp_path: Path) -> None:
    """The broker's forwarding table: never back to the neighbour a profile came from,
    never what a sent filter covers; merging sends fewer, wider profiles."""
    profiles = tmp_path / "p.txt"
    profiles.write_text("wide@B: OutdoorTemp(value > 20)\n"
                        "narrow@c1: OutdoorTemp(value > 25)\n"
                        "r1@c2: Temperature(room = 1)\n"
                        "r2@c2: Temperature(room = 2)\n")
    data = json.loads(run("forward", str(profiles), "--schema", SCHEMA, "-n", "B", "-n", "C"))
    got = {y: v["profiles"] for y, v in data["neighbours"].items()}
    assert got == {
        "B": ["narrow@c1: OutdoorTemp(value > 25.0)", "r1@c2: Temperature(room = 1)",
              "r2@c2: Temperature(room = 2)"],
        "C": ["wide@B: OutdoorTemp(value > 20.0)", "r1@c2: Temperature(room = 1)",
              "r2@c2: Temperature(room = 2)"],
    }
    assert data["neighbours"]["B"]["without_covering"] == 3
    merged = json.loads(run("forward", str(profiles), "--schema", SCHEMA, "-n", "C",
                            "--strategy", "merging"))["neighbours"]["C"]
    assert merged["count"] == 2 and merged["without_covering"] == 4
    assert any(line.endswith("Temperature(room < 3)") for line in merged["profiles"])
    simple = json.loads(run("forward", str(profiles), "--schema", SCHEMA, "-n", "C",
                            "--strategy", "simple"))["neighbours"]["C"]
    assert simple["count"] == 4


def test_forward_bad_profile_file_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("ok: OutdoorTemp(value > 20)\nbad: OutdoorTemp(vlue > 1)\n")
    r = subprocess.run([sys.executable, "-m", "siftbus", "covering", "forward", str(bad),
                        "--schema", SCHEMA, "-n", "B"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "line 2" in r.stderr and "vlue" in r.stderr
