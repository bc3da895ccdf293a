"""Streaming event cutting with lxml ``iterparse``.

The parser reports the end of every element whose name is the root name of some registered
target (lxml filters the tags in C, so other elements cost no Python work). At that point
the element's subtree is complete, so targets whose discriminating predicate lies below the
event root are decided on the whole event, children before the discriminator included (the
thesis only collected what followed the discriminator). After the consumer has handled an
element it is cleared together with its already handled preceding siblings, unless an
ancestor could itself still become an event (nested events), so memory stays bounded by
the largest open event, not by the document.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO, Any

from lxml import etree

from siftbus.errors import XmlInputError

#: a tag no document can contain, for "cut nothing" (lxml treats an empty tag list as all)
_NOTHING = "{urn:siftbus:xmlfilter:none}none"


def _local(tag: str) -> str:
    return tag[tag.index("}") + 1 :] if tag[:1] == "{" else tag


def cut(
    source: bytes | str | IO[bytes],
    exact: set[str],
    local: set[str],
    *,
    name: str | None = None,
) -> Iterator[tuple[Any, list[str]]]:
    """Yield ``(element, tags)`` for each element named like an event root, in end order.

    ``tags`` are the Clark tags of the element's ancestors-or-self, document root first.
    The element must be used before the next item is requested: it is cleared afterwards.
    Raises :class:`~siftbus.errors.XmlInputError` (with line and column) when the input is
    not well-formed; elements before the error have been yielded already.
    """
    if isinstance(source, str):
        source = source.encode()
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    tags = sorted(exact) + ["{*}" + n for n in sorted(local)] or [_NOTHING]
    ctx = etree.iterparse(
        stream, events=("end",), tag=tags, remove_comments=True, remove_pis=True,
        resolve_entities=False, no_network=True, huge_tree=True,
    )
    candidate: dict[str, bool] = {}  # tag -> could an element so named be an event root?
    # Siblings share their ancestors: the chain of the last parent is reused. Holding the
    # parent's proxy keeps lxml from handing the same proxy object to another element.
    last_parent: Any = None
    last_chain: list[str] = []
    last_keep = False
    try:
        for _, el in ctx:
            parent = el.getparent()
            if parent is None or parent is not last_parent:
                above: list[str] = []
                keep = False
                p = parent
                while p is not None:
                    t = p.tag
                    above.append(t)
                    if not keep:
                        c = candidate.get(t)
                        if c is None:
                            c = candidate[t] = t in exact or (bool(local) and _local(t) in local)
                        keep = c
                    p = p.getparent()
                above.reverse()
                last_parent, last_chain, last_keep = parent, above, keep
            chain = [*last_chain, el.tag]
            keep = last_keep
            yield el, chain
            if not keep:
                el.clear()
                if parent is not None:
                    while el.getprevious() is not None:
                        del parent[0]
    except etree.XMLSyntaxError as exc:
        line, col = exc.position if exc.position else (None, None)
        raise XmlInputError(f"not well-formed XML: {exc.msg}", source=name, line=line,
                            column=col) from None
