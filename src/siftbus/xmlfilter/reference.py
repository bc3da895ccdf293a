"""Per-subscription evaluation with lxml XPath: the oracle and the benchmark baseline.

Every content filter becomes one XPath 1.0 expression ``TARGET[cond1][cond2]...`` evaluated
on the whole parsed document (EXSLT regular expressions for globs, two extension functions
for EPC patterns and siftbus's decimal syntax). Nothing is shared between subscriptions:
this is what a broker without an index does, and what the assignment of the thesis asked
to compare against.

``mode="python"`` instead selects the event roots with the target's XPath and each
condition's nodes with its path's XPath, and applies the operators of
:mod:`siftbus.xmlfilter.operators` in Python: a second, independent reading of the same
semantics.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from lxml import etree

from siftbus.errors import XmlInputError
from siftbus.xmlfilter.operators import EpcPattern, glob_regex, parse_number, reference_test
from siftbus.xmlfilter.subscription import (
    Condition,
    ContentFilter,
    NestedFilter,
    Receiver,
    Subscription,
)
from siftbus.xmlfilter.types import TypeHierarchy
from siftbus.xmlfilter.xpath import Target, XPathWriter

_SB = "urn:siftbus:xpath"
_RE = "http://exslt.org/regular-expressions"

_fns = etree.FunctionNamespace(_SB)


def _first_string(arg: Any) -> str:
    if isinstance(arg, list):
        if not arg:
            return ""
        arg = arg[0]
        if hasattr(arg, "itertext"):
            return "".join(arg.itertext())
    return str(arg)


@_fns("epc")
def _epc(_ctx: Any, value: Any, pattern: str) -> bool:
    return EpcPattern.parse(pattern).matches(_first_string(value))


@_fns("isnum")
def _isnum(_ctx: Any, value: Any) -> bool:
    return parse_number(_first_string(value)) is not None


@_fns("num")
def _num(_ctx: Any, value: Any) -> float:
    x = parse_number(_first_string(value))
    return float("nan") if x is None else x


def xpath_literal(s: str) -> str:
    """An XPath 1.0 string literal for any text (``concat`` when it has both quotes)."""
    if "'" not in s:
        return f"'{s}'"
    if '"' not in s:
        return f'"{s}"'
    parts = s.split("'")
    return "concat(" + ", \"'\", ".join(f"'{p}'" for p in parts) + ")"


def _value_test(c: Condition) -> str:
    """An XPath boolean over the context node ``.`` for one occurrence."""
    kind = c.operator.kind
    v = "string(.)"
    if kind == "exists":
        return "true()"
    if kind == "equals":
        return f"{v}={xpath_literal(c.values[0])}"
    if kind == "in-set":
        return "(" + " or ".join(f"{v}={xpath_literal(x)}" for x in c.values) + ")"
    if kind == "match":
        rx = "(?s)^(?:" + glob_regex(c.values[0]).pattern[: -len(r"\Z")] + r")\Z"
        return f"re:test({v}, {xpath_literal(rx)})"
    if kind == "epc":
        return f"sb:epc({v}, {xpath_literal(c.values[0])})"
    ops = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    return f"(sb:isnum({v}) and sb:num({v}) {ops[c.operator.cmp]} {float(c.values[0])!r})"


def _predicates(conditions: Iterable[Condition], nested: Iterable[NestedFilter],
                writer: XPathWriter) -> str:
    """The conditions and nested filters as XPath predicates on the context node."""
    parts = []
    for c in conditions:
        rel = writer.relpath(c.path)
        test = _value_test(c)
        if test == "true()":
            parts.append(f"[{rel}]")
        elif c.quantifier == "any":
            parts.append(f"[{rel}[{test}]]")
        else:
            parts.append(f"[{rel} and not({rel}[not({test})])]")
    for nf in nested:  # some selected element satisfies the nested filter
        parts.append(f"[{writer.relpath(nf.path)}"
                     f"{_predicates(nf.conditions, nf.nested, writer)}]")
    return "".join(parts)


def filter_xpath(f: ContentFilter, writer: XPathWriter, target: Target | None = None) -> str:
    """One XPath selecting every event root the filter matches (through ``target``, one
    of the concrete targets of an abstract ``#Type`` filter)."""
    return (writer.target(target or f.target)
            + _predicates(f.conditions, f.nested, writer))


def _targets(f: ContentFilter, types: TypeHierarchy | None) -> tuple[Target, ...]:
    if f.target.type_name is None:
        return (f.target,)
    return types.resolve(f.target.type_name) if types is not None else ()


def _python_conditions(conditions: Iterable[Condition], nested: Iterable[NestedFilter]
                       ) -> list[tuple[Any, Any, Any]]:
    """For the python reading: (selector XPath, condition, test) per condition, and
    (selector XPath, None, the nested filter's own list) per nested filter."""
    out: list[tuple[Any, Any, Any]] = []
    for c in conditions:
        cw = XPathWriter()
        out.append((etree.XPath(cw.relpath(c.path), namespaces=cw.namespaces), c,
                    reference_test(c.operator, c.values)))
    for nf in nested:
        nw = XPathWriter()
        out.append((etree.XPath(nw.relpath(nf.path), namespaces=nw.namespaces), None,
                    _python_conditions(nf.conditions, nf.nested)))
    return out


def _python_holds(node: Any, conds: list[tuple[Any, Any, Any]]) -> bool:
    for sel, c, test in conds:
        if c is None:  # a nested filter: some selected element satisfies it
            if not any(_python_holds(n, test) for n in sel(node)):
                return False
        elif not XPathReference._cond(node, sel, c, test):
            return False
    return True


@dataclass(frozen=True, slots=True)
class ReferenceEvent:
    """One located event of the oracle."""

    element: Any
    subscriptions: tuple[str, ...]
    receivers: tuple[Receiver, ...]


class XPathReference:
    """Evaluate every subscription on its own with lxml XPath."""

    def __init__(self, subscriptions: Iterable[Subscription] = (), *,
                 mode: Literal["xpath", "python"] = "xpath",
                 types: TypeHierarchy | None = None) -> None:
        self.mode = mode
        self.types = types
        self._subs: dict[str, Subscription] = {}
        self._compiled: dict[str, list[tuple[Any, Any, list[tuple[Any, Condition, Any]]]]] = {}
        for s in subscriptions:
            self.add(s)

    def add(self, sub: Subscription) -> None:
        entries = []
        for f in sub.filters:
            for t in _targets(f, self.types):
                w = XPathWriter()
                full = filter_xpath(f, w, t)
                ns = dict(w.namespaces, sb=_SB, re=_RE)
                target = etree.XPath(w.target(t), namespaces=ns)
                entries.append((etree.XPath(full, namespaces=ns), target,
                                _python_conditions(f.conditions, f.nested)))
        self._subs[sub.id] = sub
        self._compiled[sub.id] = entries

    def remove(self, sub_id: str) -> None:
        del self._subs[sub_id]
        del self._compiled[sub_id]

    def __len__(self) -> int:
        return len(self._subs)

    @staticmethod
    def parse(source: bytes | str) -> Any:
        raw = source.encode() if isinstance(source, str) else source
        parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False,
                                 no_network=True, huge_tree=True)
        try:
            return etree.parse(io.BytesIO(raw), parser)
        except etree.XMLSyntaxError as exc:
            raise XmlInputError(f"not well-formed XML: {exc.msg}") from None

    def located(self, tree: Any) -> list[Any]:
        """Every element some registered target locates, in end (post-) order."""
        found: set[Any] = set()
        for entries in self._compiled.values():
            for _, target, _ in entries:
                found.update(target(tree))
        return [el for _, el in etree.iterwalk(tree, events=("end",)) if el in found]

    def _sub_matches(self, entries: list[Any], tree: Any) -> set[Any]:
        out: set[Any] = set()
        for full, target, conds in entries:
            if self.mode == "xpath":
                out.update(full(tree))
                continue
            for root in target(tree):
                if _python_holds(root, conds):
                    out.add(root)
        return out

    @staticmethod
    def _cond(root: Any, sel: Any, c: Condition, test: Any) -> bool:
        nodes = sel(root)
        if not nodes:
            return False
        vals = [n if isinstance(n, str) else "".join(n.itertext()) for n in nodes]
        if c.quantifier == "any":
            return any(test(v) for v in vals)
        return all(test(v) for v in vals)

    def evaluate(self, source: bytes | str) -> list[ReferenceEvent]:
        """Located events in end order with their subscriptions and receivers."""
        tree = self.parse(source)
        hits: dict[Any, set[str]] = {}
        for sid, entries in self._compiled.items():
            for el in self._sub_matches(entries, tree):
                hits.setdefault(el, set()).add(sid)
        out = []
        for el in self.located(tree):
            sids = tuple(sorted(hits.get(el, ())))
            recs = tuple(sorted({self._subs[s].receiver for s in sids}))
            out.append(ReferenceEvent(el, sids, recs))
        return out

    def count_matches(self, source: bytes | str) -> int:
        """Number of (event, subscription) matches: the benchmark's work unit."""
        tree = self.parse(source)
        return sum(len(self._sub_matches(entries, tree)) for entries in self._compiled.values())
