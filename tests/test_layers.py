"""The layer map of DESIGN.md, enforced from the code's own imports (every import
statement, also those inside functions and under ``TYPE_CHECKING``): a module imports
only its own layer and the layers below it, nothing imports ``cli``, and no two modules
import each other, directly or through others."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
# lowest first, as DESIGN.md lists them; a layer may import only those before it
ORDER = ["errors", "telemetry", "model", "lang", "match", "covering", "temporal", "wire",
         "security", "broker", "client", "channel", "xmlfilter", "spark", "gateway", "bridge",
         "cli"]
RANK = {name: i for i, name in enumerate(ORDER)}
# the package's face re-exports every layer for users; the entry point runs the CLI
ENTRY_POINTS = {"siftbus", "siftbus.__main__"}
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / "siftbus").rglob("*.py"))}


def imported(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The siftbus modules ``mod`` imports (a package's ``__init__`` counts as a module)."""
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = base[: len(base) - node.level + 1]
                target = ".".join(pkg + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from siftbus.x import y` names the module x.y where there is one (the
            # package's own face is then not what the importer relies on)
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                       for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != mod)
    return out


def layer(mod: str) -> str:
    return mod.split(".")[1] if "." in mod else "siftbus"


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imported(m, p, known) for m, p in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_layer_is_in_the_map() -> None:
    assert len(modules()) > 50, f"no package found under {SRC}"
    layers = {layer(m) for m in modules()} - {"siftbus", "__main__"}
    assert layers <= set(RANK), f"layers missing from DESIGN.md's order: {layers - set(RANK)}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [f"{m} -> {t}" for m, targets in graph().items() if m not in ENTRY_POINTS
              for t in sorted(targets) if t not in ENTRY_POINTS
              and RANK[layer(t)] > RANK[layer(m)]]
    assert upward == []


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    """The check above cannot pass vacuously: a planted cycle is reported."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("mod", sorted(modules()))
def test_modules_stay_readable_in_one_sitting(mod: str) -> None:
    lines = modules()[mod].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{mod} has {lines} lines"
