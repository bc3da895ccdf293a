"""ADiWa subscriptions: value objects, the XML reader (XSD-validated) and the builder API.

A subscription is one receiver and a disjunction of content filters; a content filter is a
target (where an event starts) and a conjunction of conditions (attribute path, operator,
quantifier, values). Documents are validated against the shipped XSDs
(``schemas/subscriptionFormat.xsd`` and ``schemas/filterFormat.xsd``) with xmlschema.

Defaults: an empty ``callbackMethod`` becomes the method through which the subscription was
submitted, an empty ``callbackAddress`` the sender's address; a missing quantifier is
``all``. Two subscriptions are *the same* when receiver, subscriber id and the set of
normalised filters are equal; :attr:`Subscription.digest` is the SHA-256 of that canonical
form and a matcher rejects a second copy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from lxml import etree

from siftbus.errors import SubscriptionError, XmlFilterError
from siftbus.xmlfilter.limits import DEFAULT_LIMITS, XmlLimits, excerpt, quoted
from siftbus.xmlfilter.operators import OperatorSpec, lookup, normalise_values
from siftbus.xmlfilter.splitter import check_doctype, syntax_error
from siftbus.xmlfilter.xpath import RelPath, Target, compile_path, compile_target

SUBSCRIPTION_NS = "http://www.adiwa.net/subscription/1.0"
FILTER_NS = "http://www.adiwa.net/filter/1.0"

Quantifier = Literal["all", "any"]

#: the longest ``timeoutInSeconds`` accepted: 100 years
MAX_TIMEOUT = 100 * 365 * 24 * 3600

_S = f"{{{SUBSCRIPTION_NS}}}"
_F = f"{{{FILTER_NS}}}"


@dataclass(frozen=True, slots=True, order=True)
class Receiver:
    """Where notifications go. Identity is (method, address), after defaults."""

    method: str
    address: str

    def __str__(self) -> str:
        return f"{self.method} {self.address}"


@dataclass(frozen=True, slots=True)
class Condition:
    """One conjunct: ``quantifier`` occurrence(s) of ``path`` satisfy ``operator(values)``.

    ``all``: the path occurs at least once and every occurrence satisfies the operator;
    ``any``: at least one occurrence does.
    """

    attribute: str
    path: RelPath
    operator: OperatorSpec
    values: tuple[str, ...]
    quantifier: Quantifier = "all"

    def canonical(self) -> str:
        return "|".join((self.path.canonical(), self.operator.name, self.quantifier,
                         *self.values))


@dataclass(frozen=True, slots=True)
class ContentFilter:
    """A target and a conjunction of conditions (distinct; a repeated one counts once)."""

    target: Target
    conditions: tuple[Condition, ...]
    id: str | None = None

    @staticmethod
    def build(
        target: str,
        conditions: Iterable[Sequence[Any]] = (),
        *,
        namespaces: Mapping[str, str] | None = None,
        id: str | None = None,
    ) -> ContentFilter:
        """Compile a filter from text: conditions as ``(attribute, operatorId, values)``
        or ``(attribute, operatorId, values, quantifier)``."""
        t = compile_target_checked(target, namespaces)
        conds = []
        for spec in conditions:
            if len(spec) not in (3, 4):
                raise SubscriptionError(
                    "a condition is (attribute, operatorId, values[, quantifier])"
                )
            values = (spec[2],) if isinstance(spec[2], str) else tuple(spec[2])
            conds.append(
                make_condition(spec[0], spec[1], values, spec[3] if len(spec) == 4 else None,
                               namespaces=namespaces, target=t)
            )
        return ContentFilter(t, _dedupe(conds), id)

    def canonical(self) -> str:
        return self.target.canonical() + "{" + ";".join(
            sorted(c.canonical() for c in self.conditions)) + "}"


def _dedupe(conds: Iterable[Condition]) -> tuple[Condition, ...]:
    seen: dict[str, Condition] = {}
    for c in conds:
        seen.setdefault(c.canonical(), c)
    return tuple(seen.values())


def _check_size(what: str, text: str, limit: int, name: str) -> None:
    if len(text) > limit:
        raise SubscriptionError(f"{what} of {len(text):,} characters, more than {limit:,} "
                                f"({name}): {quoted(text)}")


def compile_target_checked(text: str, namespaces: Mapping[str, str] | None,
                           limits: XmlLimits = DEFAULT_LIMITS) -> Target:
    """:func:`compile_target` after the ``max_expression`` check."""
    _check_size("target", text, limits.max_expression, "max_expression")
    return compile_target(text, namespaces)


def make_condition(
    attribute: str,
    operator_id: str,
    values: Sequence[str] = (),
    quantifier: str | None = None,
    *,
    namespaces: Mapping[str, str] | None = None,
    target: Target | None = None,
    limits: XmlLimits = DEFAULT_LIMITS,
) -> Condition:
    """Compile one condition; the path is normalised relative to ``target``'s event root.

    Refused beyond ``limits``: a path longer than ``max_expression`` characters, more than
    ``max_values`` operands, an operand longer than ``max_value``.
    """
    _check_size("attribute path", attribute, limits.max_expression, "max_expression")
    if len(values) > limits.max_values:
        raise SubscriptionError(f"{len(values):,} values in one condition, more than "
                                f"{limits.max_values:,} (max_values)", field="value")
    for v in values:
        _check_size("value", v, limits.max_value, "max_value")
    spec = lookup(operator_id)
    q = quantifier or "all"
    if q not in ("all", "any"):
        raise SubscriptionError(f"quantifier must be 'all' or 'any', got {quoted(q)}",
                                field="quantifier")
    path = compile_path(attribute, namespaces, target)
    return Condition(attribute, path, spec, normalise_values(spec, values), q)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A receiver and a disjunction of content filters."""

    id: str
    receiver: Receiver
    filters: tuple[ContentFilter, ...]
    subscriber_id: str | None = None
    subscription_method: str | None = None
    record_time: str | None = None
    timeout_seconds: int | None = None
    #: SHA-256 (hex) of the canonical form: equal digests mean an exact duplicate
    digest: str = field(default="", compare=False)

    @staticmethod
    def build(
        receiver: Receiver | tuple[str, str],
        filters: Iterable[ContentFilter],
        *,
        id: str | None = None,
        subscriber_id: str | None = None,
    ) -> Subscription:
        """The programmatic API: a subscription from compiled filters."""
        rec = receiver if isinstance(receiver, Receiver) else Receiver(*receiver)
        if not rec.method or not rec.address:
            raise SubscriptionError("a receiver needs a callback method and address",
                                    field="receiver")
        fs = tuple(filters)
        if not fs:
            raise SubscriptionError("a subscription needs at least one contentFilter",
                                    field="filterList")
        digest = _digest(rec, fs, subscriber_id)
        return Subscription(id or "sub-" + digest[:16], rec, fs, subscriber_id, digest=digest)

    def canonical(self) -> str:
        parts = [self.receiver.method, self.receiver.address, self.subscriber_id or ""]
        parts.extend(sorted({f.canonical() for f in self.filters}))
        return "\n".join(parts)


def _digest(rec: Receiver, fs: tuple[ContentFilter, ...], subscriber: str | None) -> str:
    parts = [rec.method, rec.address, subscriber or ""]
    parts.extend(sorted({f.canonical() for f in fs}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# -- XML ---------------------------------------------------------------------------------


@cache
def _schema() -> Any:
    import xmlschema

    path = resources.files("siftbus.xmlfilter") / "schemas" / "subscriptionFormat.xsd"
    with resources.as_file(path) as p:
        return xmlschema.XMLSchema(str(p))


def _parse_xml(data: bytes | str, source: str | None) -> Any:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_comments=True,
                             remove_pis=True, huge_tree=False)
    try:
        raw = data.encode() if isinstance(data, str) else data
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as exc:
        raise syntax_error(exc, source) from None
    check_doctype(root, source)
    return root


def parse_subscriptions(
    data: bytes | str,
    *,
    source: str | None = None,
    default_method: str | None = None,
    sender: str | None = None,
    validate: bool = True,
    limits: XmlLimits = DEFAULT_LIMITS,
) -> list[Subscription]:
    """Read a ``subscriptionList`` or ``subscription`` document.

    ``default_method`` and ``sender`` fill an empty ``callbackMethod`` / ``callbackAddress``.
    Raises :class:`~siftbus.errors.XmlFilterError` (with line) on any problem.
    """
    return [s for s, _ in read_subscriptions(data, source=source,
                                             default_method=default_method, sender=sender,
                                             validate=validate, limits=limits)]


def read_subscriptions(
    data: bytes | str,
    *,
    source: str | None = None,
    default_method: str | None = None,
    sender: str | None = None,
    validate: bool = True,
    limits: XmlLimits = DEFAULT_LIMITS,
) -> list[tuple[Subscription, int | None]]:
    """:func:`parse_subscriptions` with the line of each ``subscription`` element (so that
    a later refusal, a duplicate say, can name it)."""
    root = _parse_xml(data, source)
    if validate:
        schema = _schema()
        for err in schema.iter_errors(root):
            line = getattr(err, "sourceline", None)
            reason = err.reason or err.message
            raise SubscriptionError(f"not valid against the ADiWa schema: {excerpt(reason, 200)}",
                                    source=source, line=line)
    if root.tag == _S + "subscriptionList":
        elements = [e for e in root if e.tag == _S + "subscription"]
    elif root.tag == _S + "subscription":
        elements = [root]
    else:
        raise SubscriptionError(
            f"root element must be subscriptionList or subscription in {SUBSCRIPTION_NS}, "
            f"got {root.tag}", source=source, line=root.sourceline)
    out = []
    for el in elements:
        try:
            out.append((_subscription(el, default_method, sender, limits), el.sourceline))
        except XmlFilterError as exc:
            raise exc.located(source=source) from None
    return out


def _text(el: Any, name: str) -> str | None:
    child = el.find(name)
    if child is None:
        return None
    return (child.text or "").strip()


def _timeout(el: Any) -> int | None:
    """``timeoutInSeconds``: an integer from 1 to ``MAX_TIMEOUT`` (100 years), or None."""
    child = el.find(_S + "timeoutInSeconds")
    if child is None:
        return None
    text = (child.text or "").strip()
    digits = text.lstrip("+")
    if not digits.isdigit() or len(digits) > 10 or not 0 < int(digits) <= MAX_TIMEOUT:
        raise SubscriptionError(f"timeoutInSeconds must be a whole number of seconds from 1 "
                                f"to {MAX_TIMEOUT:,}, got {quoted(text)}",
                                line=child.sourceline, field="timeoutInSeconds")
    return int(digits)


def _subscription(el: Any, default_method: str | None, sender: str | None,
                  limits: XmlLimits) -> Subscription:
    rec_el = el.find(_S + "receiver")
    if rec_el is None:
        raise SubscriptionError("subscription without receiver", line=el.sourceline)
    method = _text(rec_el, _S + "callbackMethod") or default_method
    address = _text(rec_el, _S + "callbackAddress") or sender
    if not method:
        raise SubscriptionError("empty callbackMethod and no submitting method to default to",
                                line=rec_el.sourceline, field="callbackMethod")
    if not address:
        raise SubscriptionError("empty callbackAddress and no sender address to default to",
                                line=rec_el.sourceline, field="callbackAddress")
    flist = el.find(_S + "filterList")
    filters: list[ContentFilter] = []
    if flist is not None:
        for f in flist:
            if f.tag == _F + "conceptFilter":
                raise SubscriptionError("conceptFilter is not specified by ADiWa and not "
                                        "supported", line=f.sourceline, field="conceptFilter")
            if f.tag == _F + "contentFilter":
                if len(filters) == limits.max_filters:
                    raise SubscriptionError(f"more than {limits.max_filters:,} contentFilters "
                                            "in one subscription (max_filters)",
                                            line=f.sourceline)
                filters.append(_content_filter(f, limits))
    timeout = _timeout(el)
    try:
        sub = Subscription.build(Receiver(method, address), filters, id=el.get("id"),
                                 subscriber_id=_text(el, _S + "subscriberId"))
    except XmlFilterError as exc:
        raise exc.located(line=el.sourceline) from None
    return Subscription(
        sub.id, sub.receiver, sub.filters, sub.subscriber_id,
        _text(el, _S + "subscriptionMethod"), _text(el, _S + "recordTime"),
        timeout, digest=sub.digest,
    )


def _prefixes(el: Any) -> dict[str, str]:
    """The namespace prefixes in scope at an element, its own declarations included."""
    return {k: v for k, v in el.nsmap.items() if k}


def _content_filter(el: Any, limits: XmlLimits) -> ContentFilter:
    line = el.sourceline
    ns = _prefixes(el)
    if el.find(_F + "contentFilter") is not None:
        raise SubscriptionError("nested contentFilter (profile 2) is not supported", line=line,
                                field="contentFilter")
    if el.get("visibleAttributes"):
        raise SubscriptionError("visibleAttributes is not supported", line=line,
                                field="visibleAttributes")
    try:
        target = compile_target_checked(el.get("target", ""), ns, limits)
    except XmlFilterError as exc:
        raise exc.located(line=line) from None
    conds: list[Condition] = []
    for c in el.iterchildren(_F + "condition"):
        if len(conds) == limits.max_conditions:
            raise SubscriptionError(f"more than {limits.max_conditions:,} conditions in one "
                                    "contentFilter (max_conditions)", line=c.sourceline)
        try:
            conds.append(make_condition(
                c.get("attribute", ""), c.get("operatorId", ""),
                [v.text or "" for v in c.iterchildren(_F + "value")],
                c.get("quantifier"), namespaces=_prefixes(c), target=target, limits=limits,
            ))
        except XmlFilterError as exc:
            raise exc.located(line=c.sourceline) from None
    return ContentFilter(target, _dedupe(conds), el.get("id"))


# -- writing ---------------------------------------------------------------------------


def _attr_text(c: Condition) -> str:
    return c.attribute


def to_xml(subscriptions: Iterable[Subscription], namespaces: Mapping[str, str] | None = None
           ) -> bytes:
    """Serialise subscriptions as a ``subscriptionList`` document (valid against the XSD).

    Filters are written with the target and attribute texts as given; ``namespaces`` are
    declared on the root so their prefixes resolve.
    """
    nsmap: dict[str | None, str] = {None: SUBSCRIPTION_NS, "aff": FILTER_NS}
    for k, v in (namespaces or {}).items():
        nsmap[k] = v
    root = etree.Element(_S + "subscriptionList", nsmap=nsmap)
    for s in subscriptions:
        el = etree.SubElement(root, _S + "subscription", id=s.id)
        if s.subscriber_id is not None:
            etree.SubElement(el, _S + "subscriberId").text = s.subscriber_id
        rec = etree.SubElement(el, _S + "receiver")
        etree.SubElement(rec, _S + "callbackMethod").text = s.receiver.method
        etree.SubElement(rec, _S + "callbackAddress").text = s.receiver.address
        fl = etree.SubElement(el, _S + "filterList")
        for f in s.filters:
            fe = etree.SubElement(fl, _F + "contentFilter", target=f.target.text)
            if f.id is not None:
                fe.set("id", f.id)
            for c in f.conditions:
                ce = etree.SubElement(fe, _F + "condition", attribute=_attr_text(c),
                                      operatorId=c.operator.name, quantifier=c.quantifier)
                for v in c.values:
                    etree.SubElement(ce, _F + "value").text = v
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
