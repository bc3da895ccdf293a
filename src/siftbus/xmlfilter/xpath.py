"""The restricted XPath of ADiWa subscriptions: targets and attribute paths.

Grammar (see ``docs/xmlfilter.md`` for the full text)::

    Target    ::= ('/' | '//')? Step (('/' | '//') Step)* Predicate*
    Predicate ::= '[' PredPath ('=' Literal)? ']'
    PredPath  ::= '//'? (Step (('/' | '//') Step)*)? ('/'? '@' QName)?
    AttrPath  ::= '#content' | '/'? '//'? Step (('/' | '//') Step)* ('/@' QName)? | '/'? '@' QName
    Step      ::= QName
    Literal   ::= "'" [^']* "'" | '"' [^"]* '"'

Decisions (thesis §7.3):

* A target without a leading slash is evaluated at the document node, so ``adiwaEvent[...]``
  names the root element; ``//X`` names an element ``X`` at any depth.
* An unprefixed element name matches that local name in any namespace (events often use a
  default namespace the subscriber does not spell out); ``p:name`` matches exactly the
  namespace URI that ``p`` is bound to in the subscription document. An unprefixed
  attribute name is the attribute without namespace, as in XML.
* ``//`` inside a predicate or attribute path means "any descendant of the event root",
  not "anywhere in the document".
* Wildcards, ``.``/``..``, axes (``child::``), functions (``text()``, ``contains(...)``),
  node tests, numbers and operators other than ``=`` are rejected with an
  :class:`~siftbus.errors.XPathSubsetError` that names the 1-based position.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from siftbus.errors import XPathSubsetError
from siftbus.xmlfilter.limits import quoted

Axis = Literal["child", "descendant"]

_NCNAME = re.compile(r"[A-Za-z_\u00C0-\uFFFF][\w.\-\u00B7\u00C0-\uFFFF]*")


@dataclass(frozen=True, slots=True)
class Step:
    """One element step: its axis and name (``uri`` None = any namespace)."""

    axis: Axis
    uri: str | None
    local: str

    def matches(self, tag: str) -> bool:
        """Does an lxml Clark tag (``{uri}local`` or ``local``) satisfy this name test?"""
        if self.uri is None:
            return _local(tag) == self.local
        return tag == self.clark

    @property
    def clark(self) -> str:
        """Clark notation of an exact name; ``{*}local`` for any namespace."""
        if self.uri is None:
            return "{*}" + self.local
        return f"{{{self.uri}}}{self.local}" if self.uri else self.local

    def canonical(self) -> str:
        return ("//" if self.axis == "descendant" else "/") + self.clark


@dataclass(frozen=True, slots=True)
class AttrName:
    """An XML attribute name: lxml's key (``name`` or ``{uri}name``)."""

    key: str


@dataclass(frozen=True, slots=True)
class RelPath:
    """A path relative to an event root: element steps, then optionally one attribute.

    No steps and no attribute is the event root itself (its string-value, ``#content``).
    """

    steps: tuple[Step, ...]
    attribute: AttrName | None = None
    #: the canonical spelling, computed once (paths are interned by it)
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        text = "".join(s.canonical() for s in self.steps)
        if self.attribute is not None:
            text += "/@" + self.attribute.key
        object.__setattr__(self, "key", text or "#content")

    def canonical(self) -> str:
        """A unique spelling in Clark notation (used for interning and hashing)."""
        return self.key

    @property
    def has_descendant(self) -> bool:
        return any(s.axis == "descendant" for s in self.steps)


@dataclass(frozen=True, slots=True)
class Predicate:
    """``[path]`` (some node exists) or ``[path = 'literal']`` (some node's value equals)."""

    path: RelPath
    literal: str | None

    def canonical(self) -> str:
        if self.literal is None:
            return f"[{self.path.canonical()}]"
        return f"[{self.path.canonical()}={self.literal!r}]"


@dataclass(frozen=True, slots=True)
class Target:
    """A compiled target: where events start and what must hold below their root.

    ``steps[-1]`` is the event root; ``anchored`` means the first step is the document's root
    element (no leading ``//``).
    """

    anchored: bool
    steps: tuple[Step, ...]
    predicates: tuple[Predicate, ...]
    text: str
    #: for an abstract target (``#Type``, event-type hierarchy): the type's name; it has
    #: no steps and locates nothing itself (see ``siftbus.xmlfilter.types``)
    type_name: str | None = None
    #: the canonical spelling, computed once (targets are interned by it)
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.type_name is not None:
            object.__setattr__(self, "key", "#" + self.type_name)
            return
        steps = "".join(s.canonical() for s in self.steps)
        object.__setattr__(self, "key", steps + "".join(p.canonical() for p in self.predicates))

    @property
    def root(self) -> Step:
        return self.steps[-1]

    def canonical(self) -> str:
        return self.key

    def matches_path(self, tags: list[str]) -> bool:
        """Does the element whose ancestors-or-self tags (root first) are ``tags`` fit?"""
        if not self.anchored and len(self.steps) == 1:  # "//X": only the name counts
            return self.steps[0].matches(tags[-1])
        return _match_steps(self.steps, 0, tags, 0, self.anchored)


def _local(tag: str) -> str:
    return tag[tag.index("}") + 1 :] if tag[:1] == "{" else tag


def _match_steps(steps: tuple[Step, ...], i: int, tags: list[str], j: int, first: bool) -> bool:
    """Do ``steps[i:]`` match ``tags[j:]``, ending at the last tag? (an anchored first
    step must be the root element, a child step the next tag, a descendant step any later
    one). By dynamic programming over (step, tag): a backtracking search takes exponential
    time on ``//a//a//a…`` against a deep chain of ``a``."""
    n = len(tags)
    # reach[k]: steps[:s] can end exactly at tags[k - 1] (k tags consumed)
    reach = [False] * (n + 1)
    reach[j] = True
    for s_i in range(i, len(steps)):
        step = steps[s_i]
        nxt = [False] * (n + 1)
        if step.axis == "child" or (s_i == i and first):
            for k in range(j, n):
                if reach[k] and step.matches(tags[k]):
                    nxt[k + 1] = True
        else:
            open_ = False  # some earlier position is reached: any later tag can follow
            for k in range(j, n):
                open_ = open_ or reach[k]
                if open_ and step.matches(tags[k]):
                    nxt[k + 1] = True
        reach = nxt
        if not any(reach):
            return False
    return reach[n]


#: element steps of one target or path at most (each step costs the walk of an event)
MAX_STEPS = 64


class _Parser:
    """A tiny recursive-descent parser with positions for error messages."""

    def __init__(self, text: str, namespaces: Mapping[str, str], what: str) -> None:
        self.steps_taken = 0
        self.text = text
        self.pos = 0
        self.ns = namespaces
        self.what = what

    # -- helpers --------------------------------------------------------------
    def fail(self, message: str, pos: int | None = None) -> XPathSubsetError:
        p = self.pos if pos is None else pos
        return XPathSubsetError(
            f"{self.what} {quoted(self.text)}: {message} at position {p + 1}",
            position=p + 1,
            expression=self.text,
        )

    def peek(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def eat(self, s: str) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def unsupported(self) -> XPathSubsetError:
        """Explain the construct at the current position."""
        self.skip_ws()
        rest = self.text[self.pos :]
        if rest.startswith("*"):
            return self.fail("wildcard '*' is outside the restricted XPath subset")
        if rest.startswith(".."):
            return self.fail("parent step '..' is outside the restricted XPath subset")
        if rest.startswith("."):
            return self.fail("self step '.' is outside the restricted XPath subset")
        if rest.startswith("|"):
            return self.fail("union '|' is outside the restricted XPath subset")
        if rest.startswith("$"):
            return self.fail("variables are outside the restricted XPath subset")
        m = _NCNAME.match(rest)
        if m:
            after = rest[m.end() :]
            if after.startswith("::"):
                return self.fail(f"axis '{m.group()}::' is outside the restricted XPath subset")
            if after.lstrip().startswith("("):
                return self.fail(
                    f"function or node test '{m.group()}()' is outside the restricted XPath subset"
                )
        if rest[:1].isdigit():
            return self.fail("numbers are not allowed here; quote literals")
        if not rest:
            return self.fail("unexpected end of expression")
        return self.fail(f"unexpected {rest[0]!r}")

    def qname(self, *, attribute: bool = False) -> tuple[str | None, str]:
        start = self.pos
        m = _NCNAME.match(self.text, self.pos)
        if not m:
            raise self.unsupported()
        first = m.group()
        self.pos = m.end()
        if self.peek("::"):
            self.pos = start
            raise self.unsupported()
        if self.peek("(") or self.text[self.pos :].lstrip().startswith("("):
            self.pos = start
            raise self.unsupported()
        if self.peek(":") and not self.peek("::"):
            self.pos += 1
            m2 = _NCNAME.match(self.text, self.pos)
            if not m2:
                raise self.unsupported()
            self.pos = m2.end()
            uri = self.ns.get(first)
            if uri is None:
                raise self.fail(f"namespace prefix {quoted(first)} is not declared", start)
            return uri, m2.group()
        if attribute:
            return "", first
        return None, first

    def step(self, axis: Axis) -> Step:
        self.steps_taken += 1
        if self.steps_taken > MAX_STEPS:
            raise self.fail(f"more than {MAX_STEPS} steps")
        uri, local = self.qname()
        return Step(axis, uri, local)

    def attr(self) -> AttrName:
        uri, local = self.qname(attribute=True)
        return AttrName(f"{{{uri}}}{local}" if uri else local)

    def relpath(self, *, allow_empty: bool, leading_desc: bool) -> RelPath:
        """Steps separated by ``/`` or ``//`` and an optional final ``/@attr`` or ``@attr``."""
        steps: list[Step] = []
        axis: Axis = "descendant" if leading_desc else "child"
        if self.peek("@"):
            if leading_desc:
                raise self.fail("an attribute step must follow an element step with '/'")
            self.pos += 1
            return RelPath((), self.attr())
        while True:
            steps.append(self.step(axis))
            if self.eat("//"):
                if self.peek("@"):
                    raise self.fail("an attribute step must follow an element step with '/'")
                axis = "descendant"
                continue
            if self.eat("/"):
                if self.eat("@"):
                    return RelPath(tuple(steps), self.attr())
                axis = "child"
                continue
            if self.eat("@"):  # the thesis's spelling "Target@Type"
                return RelPath(tuple(steps), self.attr())
            break
        if not steps and not allow_empty:
            raise self.unsupported()
        return RelPath(tuple(steps))

    def literal(self) -> str:
        q = self.text[self.pos : self.pos + 1]
        if q not in ("'", '"'):
            raise self.unsupported()
        end = self.text.find(q, self.pos + 1)
        if end < 0:
            raise self.fail("unterminated string literal")
        value = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return value

    def predicate(self) -> Predicate:
        self.skip_ws()
        if self.peek("'") or self.peek('"'):
            raise self.fail("a predicate must start with a path, not a literal")
        desc = self.eat("//")
        if not desc and self.peek("/"):
            raise self.fail("absolute paths are not allowed in predicates; use '//' or relative")
        path = self.relpath(allow_empty=False, leading_desc=desc)
        self.skip_ws()
        literal: str | None = None
        if self.eat("="):
            self.skip_ws()
            literal = self.literal()
            self.skip_ws()
        if not self.eat("]"):
            if self.peek("!=") or self.peek("<") or self.peek(">"):
                raise self.fail("only '=' comparisons are allowed in predicates")
            raise self.unsupported()
        return Predicate(path, literal)


def compile_target(text: str, namespaces: Mapping[str, str] | None = None) -> Target:
    """Compile a subscription target (where events start in a document).

    Raises :class:`~siftbus.errors.XPathSubsetError` for anything outside the subset.
    """
    p = _Parser(text.strip(), namespaces or {}, "target")
    if not p.text:
        raise p.fail("empty target", 0)
    if p.peek("#") or p.peek("//#"):
        return _abstract_target(p)
    anchored = True
    axis: Axis = "child"
    if p.eat("//"):
        anchored, axis = False, "descendant"
    else:
        p.eat("/")
    if p.peek("@"):
        raise p.fail("a target must select an element, not an attribute")
    steps: list[Step] = []
    while True:
        steps.append(p.step(axis))
        if p.eat("//"):
            axis = "descendant"
        elif p.eat("/"):
            axis = "child"
        else:
            break
        if p.peek("@"):
            raise p.fail("a target must select an element, not an attribute")
    preds: list[Predicate] = []
    while p.eat("["):
        preds.append(p.predicate())
    if not p.at_end():
        if p.peek("/"):
            raise p.fail("predicates are allowed only on the last step (the event root)")
        raise p.unsupported()
    return Target(anchored, tuple(steps), tuple(preds), p.text)


#: the name of an event type (``#ObjectEvent``)
TYPE_NAME = re.compile(r"[A-Za-z_][\w.\-]*\Z")


def _abstract_target(p: _Parser) -> Target:
    """``#Type`` or ``//#Type``: every event type the hierarchy lists under ``Type``."""
    p.eat("//")
    p.eat("#")
    name = p.text[p.pos :]
    if not TYPE_NAME.match(name):
        raise p.fail("an event type '#Name' is a name (letters, digits, '_', '-', '.'); "
                     "predicates and steps are not allowed after it")
    return Target(False, (), (), p.text, type_name=name)


def compile_path(
    text: str, namespaces: Mapping[str, str] | None = None, target: Target | None = None
) -> RelPath:
    """Compile a condition's attribute path, normalised relative to the event root.

    A leading ``/`` is dropped; when the target is anchored and has no ``//`` step, a path
    that starts with the target's own steps (the path from the document root) has them
    stripped, so ``/adiwaEvent/body/x`` and ``/body/x`` and ``body/x`` are the same under
    target ``adiwaEvent``. A leading ``//`` means any descendant of the event root.
    """
    p = _Parser(text.strip(), namespaces or {}, "attribute path")
    if not p.text:
        raise p.fail("empty attribute path", 0)
    if p.text == "#content":
        return RelPath(())
    if p.peek("#"):
        raise p.fail("only '#content' may start with '#'")
    desc = p.eat("//")
    absolute = False
    if not desc:
        absolute = p.eat("/")
    if p.at_end():
        raise p.unsupported()
    path = p.relpath(allow_empty=False, leading_desc=desc)
    if not p.at_end():
        if p.peek("["):
            raise p.fail("predicates are not allowed in attribute paths")
        raise p.unsupported()
    if (
        absolute
        and not desc
        and target is not None
        and target.anchored
        and all(s.axis == "child" for s in target.steps)
        and len(path.steps) >= len(target.steps)
        and all(
            a.uri == b.uri and a.local == b.local
            for a, b in zip(target.steps, path.steps, strict=False)
        )
    ):
        path = RelPath(path.steps[len(target.steps) :], path.attribute)
        if not path.steps and path.attribute is None:
            return RelPath(())
    return path


# -- translation to real XPath 1.0 (for the lxml oracle and the baseline) -----------------


class XPathWriter:
    """Render compiled expressions as XPath 1.0 with generated namespace prefixes."""

    def __init__(self) -> None:
        self.namespaces: dict[str, str] = {}
        self._prefix: dict[str, str] = {}

    def _name(self, step: Step) -> str:
        if step.uri is None:
            return f"*[local-name()='{step.local}']"
        if step.uri == "":
            return step.local
        prefix = self._prefix.get(step.uri)
        if prefix is None:
            prefix = f"n{len(self._prefix)}"
            self._prefix[step.uri] = prefix
            self.namespaces[prefix] = step.uri
        return f"{prefix}:{step.local}"

    def _attr(self, attr: AttrName) -> str:
        if attr.key.startswith("{"):
            uri, local = attr.key[1:].split("}", 1)
            prefix = self._prefix.get(uri)
            if prefix is None:
                prefix = f"n{len(self._prefix)}"
                self._prefix[uri] = prefix
                self.namespaces[prefix] = uri
            return f"@{prefix}:{local}"
        return "@" + attr.key

    def relpath(self, path: RelPath) -> str:
        """A relative location path from the event root (``.`` for ``#content``)."""
        if not path.steps and path.attribute is None:
            return "self::node()"
        parts = ["."]
        for s in path.steps:
            parts.append(("//" if s.axis == "descendant" else "/") + self._name(s))
        if path.attribute is not None:
            parts.append("/" + self._attr(path.attribute))
        return "".join(parts)

    def target(self, target: Target) -> str:
        """An absolute location path selecting every event root of the target."""
        out = []
        for i, s in enumerate(target.steps):
            sep = "//" if s.axis == "descendant" or (i == 0 and not target.anchored) else "/"
            out.append(sep + self._name(s))
        for pred in target.predicates:
            rel = self.relpath(pred.path)
            if pred.literal is None:
                out.append(f"[{rel}]")
            else:
                q = '"' if "'" in pred.literal else "'"
                out.append(f"[{rel}={q}{pred.literal}{q}]")
        return "".join(out)
