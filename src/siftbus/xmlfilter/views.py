"""Nested filters (profile 2) and the views of an event a notification carries.

**Nested filters** (thesis §5.2.3, Listing 7). A ``contentFilter`` inside a content filter
selects elements below the event with its (relative) target, ``epcList/epc``; it is a
conjunct of the enclosing filter and holds when *some* selected element satisfies all its
conditions (relative to that element; ``#content`` is the element itself) and its own
nested filters. When none does, the enclosing filter fails (the thesis leaves this open;
an existential reading keeps the filter a conjunction).

**Views.** The notification of a subscription matched through a filter with nested filters
carries the event *consolidated*: every element a nested target selects that does not
satisfy the nested filter is removed (with its subtree), the rest of the event is kept.
A filter with ``visibleAttributes`` carries only the listed parts: each listed element path
keeps the elements it reaches with their whole subtrees, each attribute path keeps that
attribute, and the ancestors of kept parts up to the event root are kept bare (their name,
no text and no other attributes); with nested filters too, a removed element stays removed.
A subscription matched through several filters carries the union of their views (any
filter without a view: the whole event). Subscriptions whose views are equal share one
notification; so a receiver can get one event in two views, one per subscription.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lxml import etree

from siftbus.xmlfilter.operators import reference_test
from siftbus.xmlfilter.subscription import Condition, ContentFilter, NestedFilter
from siftbus.xmlfilter.xpath import RelPath, Step

_WHOLE, _BARE = 2, 1


def _steps(root: Any, steps: tuple[Step, ...]) -> list[Any]:
    """The elements ``steps`` reach from ``root``, in document order, each once. A ``//``
    step is one pass over the subtree (whatever the number of nodes it starts from), so a
    path costs its steps times the event's size."""
    nodes = [root]
    for step in steps:
        if step.axis == "child":
            nodes = [k for n in nodes for k in n
                     if isinstance(k.tag, str) and step.matches(k.tag)]
            continue
        starts = {id(n) for n in nodes}
        found: list[Any] = []
        inside = 0  # open elements that are starting points
        for event, d in etree.iterwalk(root, events=("start", "end")):
            if event == "start":
                if inside and isinstance(d.tag, str) and step.matches(d.tag):
                    found.append(d)
                if id(d) in starts:
                    inside += 1
            elif id(d) in starts:
                inside -= 1
        nodes = found
        if not nodes:
            break
    return nodes


def select(el: Any, path: RelPath) -> list[Any]:
    """The elements ``path`` reaches from ``el`` (without its attribute), document order."""
    return _steps(el, path.steps)


def values(el: Any, path: RelPath) -> list[str]:
    """The values of ``path`` below ``el``: string-values of elements, or attribute values."""
    nodes = select(el, path)
    if path.attribute is None:
        return ["".join(n.itertext()) for n in nodes]
    key = path.attribute.key
    return [v for n in nodes if (v := n.get(key)) is not None]


def condition_holds(el: Any, c: Condition) -> bool:
    """The condition on the element ``el`` (its quantifier over every occurrence)."""
    vs = values(el, c.path)
    if not vs:
        return False
    test = reference_test(c.operator, c.values)
    return any(map(test, vs)) if c.quantifier == "any" else all(map(test, vs))


def satisfies(el: Any, nf: NestedFilter) -> bool:
    """Does the selected element ``el`` satisfy the nested filter (conditions and its own
    nested filters)?"""
    return (all(condition_holds(el, c) for c in nf.conditions)
            and all(nested_holds(el, n) for n in nf.nested))


def nested_holds(el: Any, nf: NestedFilter) -> bool:
    """Does some element the nested filter selects below ``el`` satisfy it?"""
    return any(satisfies(n, nf) for n in select(el, nf.path))


def _removed(el: Any, nested: Iterable[NestedFilter], out: set[int]) -> None:
    """The elements the nested filters remove from ``el`` (ids), recursively."""
    for nf in nested:
        for n in select(el, nf.path):
            if satisfies(n, nf):
                _removed(n, nf.nested, out)
            else:
                out.add(id(n))


@dataclass(frozen=True, slots=True)
class View:
    """What of an event one filter's notification carries (see module docstring)."""

    visible: tuple[RelPath, ...] | None
    nested: tuple[NestedFilter, ...]

    @staticmethod
    def of(f: ContentFilter) -> View | None:
        """The filter's view, or None for the whole event."""
        return View(f.visible, f.nested) if f.has_view else None

    def marks(self, el: Any) -> tuple[dict[int, int], dict[int, set[str]]]:
        """(element id -> whole or bare, element id -> attributes kept) for this view; the
        caller holds every element of ``el``'s subtree (see :func:`project`)."""
        removed: set[int] = set()
        _removed(el, self.nested, removed)
        state: dict[int, int] = {}
        attrs: dict[int, set[str]] = {}
        if self.visible is None:
            _mark_whole(el, removed, state)
            return state, attrs
        for p in self.visible:
            if not p.steps and p.attribute is None:  # '#content': the whole event
                _mark_whole(el, removed, state)
                continue
            for n in select(el, p):
                if _inside_removed(n, el, removed):
                    continue
                if p.attribute is None:
                    _mark_whole(n, removed, state)
                elif n.get(p.attribute.key) is not None:
                    attrs.setdefault(id(n), set()).add(p.attribute.key)
                    state.setdefault(id(n), _BARE)
                else:
                    continue
                for a in n.iterancestors():
                    state.setdefault(id(a), _BARE)
                    if a is el:
                        break
        if state:
            state.setdefault(id(el), _BARE)
        return state, attrs


def _inside_removed(n: Any, root: Any, removed: set[int]) -> bool:
    while n is not None:
        if id(n) in removed:
            return True
        if n is root:
            return False
        n = n.getparent()
    return False


def _mark_whole(el: Any, removed: set[int], state: dict[int, int]) -> None:
    """Mark ``el`` and its subtree whole, except removed subtrees (iterative: an event may
    be 2,048 levels deep, past Python's recursion limit)."""
    stack = [el]
    while stack:
        n = stack.pop()
        if id(n) in removed:
            continue
        state[id(n)] = _WHOLE
        stack.extend(ch for ch in n if isinstance(ch.tag, str))


def project(el: Any, views: Iterable[View]) -> bytes:
    """The event ``el`` as the union of ``views`` shows it, serialised like a notification
    (UTF-8, no declaration, every namespace in scope declared on the root)."""
    # elements are told apart by id(): every proxy of the subtree is held for the
    # duration, so that lxml hands out the same one for a node and no id is reused
    pinned = list(el.iter())
    state: dict[int, int] = {}
    attrs: dict[int, set[str]] = {}
    for v in views:
        s, a = v.marks(el)
        for k, x in s.items():
            if x > state.get(k, 0):
                state[k] = x
        for k, names in a.items():
            attrs.setdefault(k, set()).update(names)
    if id(el) not in state:  # nothing to show but the event root itself
        state[id(el)] = _BARE
    copy = _copy(el, state, attrs)
    del pinned
    return etree.tostring(copy, encoding="UTF-8", xml_declaration=False, with_tail=False)


def _copy(el: Any, state: dict[int, int], attrs: dict[int, set[str]]) -> Any:
    """A new element tree with the marked parts of ``el`` (iterative, like the marks)."""
    root = etree.Element(el.tag, nsmap=el.nsmap)
    stack = [(el, root)]
    while stack:
        src, new = stack.pop()
        how = state[id(src)]
        keep = attrs.get(id(src), ())
        for k, v in src.attrib.items():
            if how == _WHOLE or k in keep:
                new.set(k, v)
        if how == _WHOLE:
            new.text = src.text
        last = None
        for ch in src:
            if isinstance(ch.tag, str) and id(ch) in state:
                copy = etree.SubElement(new, ch.tag)
                if how == _WHOLE:
                    copy.tail = ch.tail
                last = copy
                stack.append((ch, copy))
            elif how == _WHOLE and ch.tail:
                # a pruned element goes, the text after it stays (mixed content, the
                # whitespace of a pretty-printed event): the rest is as it was
                if last is None:
                    new.text = (new.text or "") + ch.tail
                else:
                    last.tail = (last.tail or "") + ch.tail
    return root
