"""Streaming event cutting with lxml's pull parser.

The parser reports the end of every element whose name is the root name of some registered
target (lxml filters the tags in C, so other elements cost no Python work). At that point
the element's subtree is complete, so targets whose discriminating predicate lies below the
event root are decided on the whole event, children before the discriminator included (the
thesis only collected what followed the discriminator). After the consumer has handled an
element it is cleared, unless an ancestor could itself still become an event (nested
events).

Input is fed to the parser in chunks of :data:`CHUNK` bytes, and between two chunks every
completed element outside a possible event is removed from the tree (only the open path
from the root and the subtrees of elements that may still become events are kept), so
memory is bounded by the largest open event and the chunk, not by the document, also when
most of the document is not events.

A message in memory of at most :data:`SMALL` bytes is parsed whole instead (its tree is
bounded by its size) and its events are taken from the tree (:func:`_cut_tree`): the pull
parser's event collection, and clearing each handled element, cost about a third of the
cutting. The output is the same (``tests/xmlfilter/test_splitter.py`` compares the two);
a message that is not well-formed goes the streaming way, which yields the events before
the error and then raises it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import IO, Any

from lxml import etree

from siftbus.errors import XmlInputError
from siftbus.xmlfilter.limits import excerpt

#: a tag no document can contain, for "cut nothing" (lxml treats an empty tag list as all)
_NOTHING = "{urn:siftbus:xmlfilter:none}none"
#: bytes fed to the parser at a time
CHUNK = 64 * 1024
#: a message in memory up to this size is fed at once and not pruned
SMALL = 1024 * 1024
# Not collect_ids=False: with it lxml 6 loads an external DTD (file:///etc/passwd).
# tests/xmlfilter/test_xml_hostile.py sends one.
_PARSER_OPTIONS: dict[str, Any] = {
    "remove_comments": True, "remove_pis": True, "resolve_entities": False,
    "no_network": True, "huge_tree": True,
}


def _local(tag: str) -> str:
    return tag[tag.index("}") + 1 :] if tag[:1] == "{" else tag


def _reader(source: bytes | bytearray | memoryview | IO[bytes]) -> Callable[[int], bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        return io.BytesIO(source).read
    return source.read


def _root_tag(read: Callable[[int], bytes], head: list[bytes]) -> str | None:
    """Read until the root element's start tag (kept in ``head``) and return its tag;
    None if the input ends or is malformed first (the main parser then says where)."""
    probe = etree.XMLPullParser(events=("start",), **_PARSER_OPTIONS)
    size = 512
    while True:
        chunk = read(size)
        if not chunk:
            return None
        head.append(chunk)
        try:
            probe.feed(chunk)
        except etree.XMLSyntaxError:
            return None
        for _, el in probe.read_events():
            return str(el.tag)
        size = min(CHUNK, size * 4)


def _prune(root: Any, is_candidate: Callable[[str], bool]) -> None:
    """Remove every completed element that is not inside a possible event.

    Only the last child of an element can still be open, so below the root each element's
    earlier children are complete; the walk follows the last children down and stops at
    an element that may become an event, whose subtree stays whole until it ends.
    """
    node = root
    while not is_candidate(node.tag):
        n = len(node)
        if n == 0:
            return
        if n > 1:
            del node[: n - 1]
        node = node[0]


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
    if isinstance(source, bytes | bytearray | memoryview) and len(source) <= SMALL:
        try:
            root = etree.fromstring(bytes(source), etree.XMLParser(**_PARSER_OPTIONS))
        except etree.XMLSyntaxError:
            root = None  # the streaming way yields the events before the error, then raises
        if root is not None:
            return _cut_tree(root, _tag_list(exact, local), _is_candidate(exact, local), name)
    return cut_stream(source, exact, local, name=name)


def _tag_list(exact: set[str], local: set[str]) -> list[str]:
    """The tags of possible event roots, as lxml's tag filters take them."""
    return sorted(exact) + ["{*}" + n for n in sorted(local)] or [_NOTHING]


def _is_candidate(exact: set[str], local: set[str]) -> Callable[[str], bool]:
    """Could an element with this Clark tag be an event root? (remembered per tag)"""
    candidate: dict[str, bool] = {}

    def is_candidate(t: str) -> bool:
        c = candidate.get(t)
        if c is None:
            c = candidate[t] = t in exact or (bool(local) and _local(t) in local)
        return c

    return is_candidate


def _ancestry(parent: Any, is_candidate: Callable[[str], bool]
              ) -> tuple[list[str], bool, list[Any]]:
    """Above an element whose parent is ``parent``: the tags, outermost first; whether one
    of them could be an event root (then the element is kept inside it); and, in that
    case, those ancestors, innermost first (else none). Both ways of :func:`cut` ask once
    per parent, which siblings share."""
    above: list[str] = []
    ancestors: list[Any] = []
    keep = False
    p = parent
    while p is not None:
        t = p.tag
        above.append(t)
        ancestors.append(p)
        if not keep:
            keep = is_candidate(t)
        p = p.getparent()
    above.reverse()
    return above, keep, ancestors if keep else []


def _cut_tree(root: Any, tags: list[str], is_candidate: Callable[[str], bool],
              name: str | None) -> Iterator[tuple[Any, list[str]]]:
    """:func:`cut` over a parsed tree: its possible event roots, in end order.

    lxml hands them over in start order, which is the end order unless one lies inside
    another. So each one waits until the next is known: an element without a candidate
    ancestor ends everything waiting, and one inside a candidate ends what waits outside
    its ancestors (the waiting ones form a chain, innermost last).
    """
    last_parent: Any = None
    last_chain: list[str] = []
    last_keep = False
    ancestors: list[Any] = []  # of last_parent, itself included, when last_keep
    waiting: list[tuple[Any, list[str]]] = []
    checked = False
    for el in root.iter(*tags):
        if not checked:
            check_doctype(el, name)
            checked = True
        parent = el.getparent()
        if parent is None or parent is not last_parent:
            last_chain, last_keep, ancestors = _ancestry(parent, is_candidate)
            last_parent = parent
        if waiting:
            if not last_keep:
                while waiting:
                    yield waiting.pop()
            else:
                while waiting and not any(a is waiting[-1][0] for a in ancestors):
                    yield waiting.pop()
        waiting.append((el, [*last_chain, el.tag]))
    while waiting:
        yield waiting.pop()


def cut_stream(
    source: bytes | bytearray | memoryview | IO[bytes],
    exact: set[str],
    local: set[str],
    *,
    name: str | None = None,
) -> Iterator[tuple[Any, list[str]]]:
    """:func:`cut` by feeding lxml's pull parser in chunks (see the module docstring)."""
    read = _reader(source)
    # a small message in memory is parsed in one go: its tree is bounded by its size
    small = isinstance(source, bytes | bytearray | memoryview) and len(source) <= SMALL
    is_candidate = _is_candidate(exact, local)
    head: list[bytes] = []
    root_tag = None if small else _root_tag(read, head)
    tags = _tag_list(exact, local)
    events: tuple[str, ...] = ("end",)
    if root_tag is not None and not is_candidate(root_tag):
        tags.append(root_tag)  # its start event hands over the root, for pruning
        events = ("start", "end")
    parser = etree.XMLPullParser(events=events, tag=tags, **_PARSER_OPTIONS)
    size = SMALL if small else CHUNK
    root: Any = None
    # Siblings share their ancestors: the chain of the last parent is reused. Holding the
    # parent's proxy keeps lxml from handing the same proxy object to another element.
    last_parent: Any = None
    last_chain: list[str] = []
    last_keep = False
    checked = False
    pending = head
    error: etree.XMLSyntaxError | None = None
    done = False
    while not done:
        try:
            if pending:
                for chunk in pending:
                    parser.feed(chunk)
                pending = []
            else:
                chunk = read(size)
                if chunk:
                    parser.feed(chunk)
                else:
                    parser.close()
                    done = True
        except etree.XMLSyntaxError as exc:
            error, done = exc, True
        for event, el in parser.read_events():
            if event == "start":
                if root is None and el.getparent() is None:
                    root = el
                continue
            if root_tag is not None and el.tag == root_tag and not is_candidate(root_tag):
                continue  # the root's name, asked for its start event only
            if not checked:
                check_doctype(el, name)
                checked = True
            parent = el.getparent()
            if parent is None or parent is not last_parent:
                last_chain, last_keep, _ = _ancestry(parent, is_candidate)
                last_parent = parent
            chain = [*last_chain, el.tag]
            keep = last_keep
            yield el, chain
            if not keep:
                # its (now empty) shell goes with the next pruning, or with the message
                el.clear()
        if error is not None:
            raise syntax_error(error, name)
        if root is not None:
            _prune(root, is_candidate)


def syntax_error(exc: etree.XMLSyntaxError, name: str | None) -> XmlInputError:
    """The parser's first fatal error as one :class:`XmlInputError` with its line and
    column (lxml's own message is sometimes a later consequence, "no element found" at
    line 0, when libxml2 gave up on an undefined entity)."""
    msg, line, col = exc.msg, None, None
    if exc.position and exc.position[0] > 0:
        line, col = exc.position
    else:  # the log's last error is the cause (it may hold older parses' errors too)
        for entry in reversed(exc.error_log):
            if entry.level_name in ("FATAL", "ERROR"):
                msg, line, col = entry.message, entry.line or None, entry.column or None
                break
    msg = msg.strip().replace(", use XML_PARSE_HUGE option", " (the parser's limit)")
    return XmlInputError(f"not well-formed XML: {excerpt(msg)}", source=name, line=line,
                         column=col)


def check_doctype(el: Any, name: str | None) -> None:
    """Refuse a document whose DTD declares entities or names an external subset: entity
    references are never expanded (no XXE, no entity expansion), so an event holding one
    could not be delivered as a standalone document."""
    info = el.getroottree().docinfo
    dtd = info.internalDTD
    if info.system_url or info.public_id or (dtd is not None and any(dtd.iterentities())):
        raise XmlInputError("the DOCTYPE declares entities or an external DTD; entity "
                            "references are not expanded, so such input is not accepted",
                            source=name)
