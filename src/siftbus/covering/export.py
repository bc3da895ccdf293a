"""Dumps of a filters poset or poset-derived forest, for people to look at.

JSON (``table_to_json``)::

    {"structure": "poset", "profiles": 5, "filters": 4,
     "nodes": [{"node": 0, "filter": "T(a <= 4)", "root": true,
                "profiles": [{"id": "a", "iface": "I1"}], "subscribers": ["I1"]}, ...],
     "edges": [[0, 2], ...],           # [upper, lower]: upper covers lower
     "roots": [0, 1]}

Graphviz DOT (``table_to_dot``): one box per filter (its profiles and interfaces below
it), an arrow from each covering filter to the filter it covers; roots are bold.
"""

from __future__ import annotations

import json
from typing import Any

from siftbus.covering.forest import PosetForest
from siftbus.covering.table import CoveringTable, FilterNode
from siftbus.lang.profile import format_profile


def structure_name(table: CoveringTable) -> str:
    return "forest" if isinstance(table, PosetForest) else "poset"


def _node_json(n: FilterNode, roots: set[FilterNode]) -> dict[str, Any]:
    return {
        "node": n.seq,
        "filter": format_profile(n.filter, with_id=False),
        "root": n in roots,
        "profiles": [{"id": pid, "iface": e.src} for pid, e in n.entries.items()],
        "subscribers": sorted(n.subscribers),
    }


def table_to_json(table: CoveringTable) -> dict[str, Any]:
    """The table as a JSON-ready dict (see the module docstring)."""
    roots = table.root_nodes()
    root_set = set(roots)
    nodes = table.nodes()
    return {
        "structure": structure_name(table),
        "profiles": len(table),
        "filters": len(nodes),
        "nodes": [_node_json(n, root_set) for n in nodes],
        "edges": [[u.seq, v.seq] for u, v in table.edges()],
        "roots": [n.seq for n in roots],
    }


def _dot_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # DOT strings use the same escapes


def table_to_dot(table: CoveringTable, *, max_profiles: int = 5) -> str:
    """The table as a Graphviz digraph (``dot -Tsvg``); long profile lists are cut."""
    roots = set(table.root_nodes())
    lines = [f"digraph {structure_name(table)} {{", "  rankdir=TB;",
             '  node [shape=box, fontname="monospace"];']
    for n in table.nodes():
        ids = [f"{pid}@{e.src}" for pid, e in n.entries.items()]
        shown = ", ".join(ids[:max_profiles])
        if len(ids) > max_profiles:
            shown += f", … (+{len(ids) - max_profiles})"
        label = f"{format_profile(n.filter, with_id=False)}\n{shown}"
        style = ", style=bold" if n in roots else ""
        lines.append(f"  n{n.seq} [label={_dot_quote(label)}{style}];")
    for u, v in table.edges():
        lines.append(f"  n{u.seq} -> n{v.seq};")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["structure_name", "table_to_dot", "table_to_json"]
