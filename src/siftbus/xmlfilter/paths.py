"""Attribute paths of events: the registered relative paths as a trie, and the walk that
collects their values from an event subtree (thesis step 3).

One walk over the event element, guided by the trie, finds every occurrence of every
registered path: element steps by Clark tag (exact) or local name (any namespace),
``//`` steps by a scan of the descendants, attributes by name. An element's value is its
string-value (all descendant text), an attribute's its value.
"""

from __future__ import annotations

from typing import Any

from siftbus.xmlfilter.xpath import RelPath, Step


class Trie:
    """Registered relative paths as a trie; ``walk`` collects their values from a subtree."""

    __slots__ = ("attrs", "desc", "exact", "kids", "leaf", "leaves", "local", "text")

    #: at most this many distinct child tags are remembered per node (documents may use
    #: any number of names; beyond this, children are looked up without the cache)
    KIDS_CACHE = 256

    def __init__(self) -> None:
        self.exact: dict[str, Trie] = {}
        self.local: dict[str, Trie] = {}
        self.desc: list[tuple[Step, Trie]] = []
        self.text: list[int] = []
        self.attrs: list[tuple[str, int]] = []
        #: the path id when this node is a plain leaf: one text path, nothing else
        self.leaf: int | None = None
        #: Clark tag of a child -> the nodes it leads to (exact name first, then local name)
        self.kids: dict[str, tuple[Trie, ...]] = {}
        #: nothing here but children that are plain leaves (``readPoint`` of
        #: ``readPoint/id``): the walk reads them without a call of its own
        self.leaves = False

    def children_for(self, tag: str) -> tuple[Trie, ...]:
        """The nodes a child element with this Clark tag leads to, remembered per tag."""
        if not isinstance(tag, str):  # not an element
            return ()
        found = []
        n = self.exact.get(tag)
        if n is not None:
            found.append(n)
        n = self.local.get(tag[tag.index("}") + 1 :] if tag[0] == "{" else tag)
        if n is not None:
            found.append(n)
        out = tuple(found)
        if len(self.kids) < self.KIDS_CACHE:
            self.kids[tag] = out
        return out

    def finish(self) -> None:
        """Compute ``leaf`` flags once all paths are inserted."""
        plain = not (self.attrs or self.desc or self.exact or self.local)
        self.leaf = self.text[0] if plain and len(self.text) == 1 else None
        for n in (*self.exact.values(), *self.local.values(), *(n for _, n in self.desc)):
            n.finish()
        kids = [*self.exact.values(), *self.local.values()]
        self.leaves = (bool(kids) and not (self.text or self.attrs or self.desc)
                       and all(n.leaf is not None for n in kids))

    def insert(self, path: RelPath, pid: int) -> None:
        node = self
        for s in path.steps:
            if s.axis == "descendant":
                nxt = next((n for st, n in node.desc if st.uri == s.uri and st.local == s.local),
                           None)
                if nxt is None:
                    nxt = Trie()
                    node.desc.append((s, nxt))
            else:
                table = node.local if s.uri is None else node.exact
                key = s.local if s.uri is None else (f"{{{s.uri}}}{s.local}" if s.uri else s.local)
                nxt = table.get(key)
                if nxt is None:
                    nxt = table[key] = Trie()
            node = nxt
        if path.attribute is None:
            node.text.append(pid)
        else:
            node.attrs.append((path.attribute.key, pid))


#: the values of one path in one event: the text of its only occurrence (the common case,
#: no list made), or the list of all of them in document order
Values = str | list[str]


def _add(out: dict[int, Values], pid: int, text: str) -> None:
    old = out.get(pid)
    if old is None:
        out[pid] = text
    elif old.__class__ is str:
        out[pid] = [old, text]
    else:
        old.append(text)  # type: ignore[union-attr]


def values_list(vs: Values) -> list[str]:
    """The occurrences of a path as a list."""
    return [vs] if vs.__class__ is str else vs  # type: ignore[return-value]


def walk(el: Any, node: Trie, out: dict[int, Values],
         seen: dict[tuple[int, int], Any] | None) -> None:
    """Collect into ``out`` (path id -> :data:`Values`) every occurrence below ``el`` of
    the paths of the trie ``node``."""
    # ``seen`` (only for paths with '//', which can reach a node twice) maps (path, id(el))
    # to the element itself: keeping the proxy alive keeps its id from being reused; and
    # (trie node, element) pairs already walked are not walked again, so that '//a//a//a'
    # costs the trie's size times the event's, not a product over the '//' steps
    if seen is not None:
        visit = (-1 - id(node), id(el))
        if visit in seen:
            return
        seen[visit] = el
    if node.text:
        text = el.text if len(el) == 0 else "".join(el.itertext())
        if text is None:
            text = ""
        for pid in node.text:
            if seen is not None:
                key = (pid, id(el))
                if key in seen:
                    continue
                seen[key] = el
            _add(out, pid, text)
    if node.attrs:
        for key_, pid in node.attrs:
            v = el.get(key_)
            if v is not None:
                if seen is not None:
                    key = (pid, id(el))
                    if key in seen:
                        continue
                    seen[key] = el
                _add(out, pid, v)
    if node.exact or node.local:
        kids = node.kids
        # plain iteration: an lxml tag filter costs more to set up (per call) than the
        # children it would skip (comments and processing instructions are not parsed)
        for ch in el:
            tag = ch.tag
            nodes = kids.get(tag)
            if nodes is None:
                nodes = node.children_for(tag)
            for n in nodes:
                leaf = n.leaf
                if leaf is not None and seen is None:
                    # the common case, inlined: a leaf whose text is one path's value
                    text = (ch.text or "") if len(ch) == 0 else "".join(ch.itertext())
                    old = out.get(leaf)
                    if old is None:
                        out[leaf] = text
                    elif old.__class__ is str:
                        out[leaf] = [old, text]
                    else:
                        old.append(text)  # type: ignore[union-attr]
                elif n.leaves and seen is None:
                    # one level further, inlined: children that are all plain leaves
                    kids2 = n.kids
                    for g in ch:
                        tag2 = g.tag
                        nodes2 = kids2.get(tag2)
                        if nodes2 is None:
                            nodes2 = n.children_for(tag2)
                        for m in nodes2:
                            text = (g.text or "") if len(g) == 0 else "".join(g.itertext())
                            at: int = m.leaf  # type: ignore[assignment]
                            old = out.get(at)
                            if old is None:
                                out[at] = text
                            elif old.__class__ is str:
                                out[at] = [old, text]
                            else:
                                old.append(text)  # type: ignore[union-attr]
                else:
                    walk(ch, n, out, seen)
    for step, n in node.desc:
        for d in el.iterdescendants("*"):
            if step.matches(d.tag):
                walk(d, n, out, seen)
