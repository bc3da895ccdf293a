"""Subscription documents: reading (XSD-validated ``subscriptionList`` / ``subscription``
XML) and writing.

Documents are validated against the shipped XSDs (``schemas/subscriptionFormat.xsd`` and
``schemas/filterFormat.xsd``, the thesis's appendix 2) with libxml2's validator through
lxml. Defaults: an empty ``callbackMethod`` becomes the method through which the
subscription was submitted, an empty ``callbackAddress`` the sender's address.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from lxml import etree

from siftbus.errors import SubscriptionError, XmlFilterError
from siftbus.xmlfilter.limits import DEFAULT_LIMITS, XmlLimits, excerpt, quoted
from siftbus.xmlfilter.splitter import check_doctype, syntax_error
from siftbus.xmlfilter.subscription import (
    FILTER_NS,
    MAX_TIMEOUT,
    SUBSCRIPTION_NS,
    Condition,
    ContentFilter,
    NestedFilter,
    Receiver,
    Subscription,
    compile_target_checked,
    compile_visible,
    dedupe,
    make_condition,
)
from siftbus.xmlfilter.xpath import compile_path

_S = f"{{{SUBSCRIPTION_NS}}}"
_F = f"{{{FILTER_NS}}}"
_CONDITION, _CONTENT_FILTER, _VALUE = _F + "condition", _F + "contentFilter", _F + "value"
_CONCEPT_FILTER = _F + "conceptFilter"
_RECEIVER, _FILTER_LIST, _TIMEOUT = _S + "receiver", _S + "filterList", _S + "timeoutInSeconds"
_METHOD, _ADDRESS = _S + "callbackMethod", _S + "callbackAddress"


@cache
def _schema() -> Any:
    path = resources.files("siftbus.xmlfilter") / "schemas" / "subscriptionFormat.xsd"
    with resources.as_file(path) as p:
        return etree.XMLSchema(etree.parse(str(p)))


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
        if not schema.validate(root):
            err = schema.error_log.last_error
            raise SubscriptionError(f"not valid against the ADiWa schema: "
                                    f"{excerpt(err.message, 200)}", source=source,
                                    line=err.line or None)
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


def _children(el: Any) -> dict[str, Any]:
    """The first child element of each name (one pass in C; ``find`` goes through
    lxml's Python path language, a few microseconds a call)."""
    out: dict[str, Any] = {}
    for ch in el:
        out.setdefault(ch.tag, ch)
    return out


def _text_of(child: Any) -> str | None:
    return None if child is None else (child.text or "").strip()


def _timeout(child: Any) -> int | None:
    """``timeoutInSeconds``: an integer from 1 to ``MAX_TIMEOUT`` (100 years), or None."""
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
    parts = _children(el)
    rec_el = parts.get(_RECEIVER)
    if rec_el is None:
        raise SubscriptionError("subscription without receiver", line=el.sourceline)
    rec = _children(rec_el)
    method = _text_of(rec.get(_METHOD)) or default_method
    address = _text_of(rec.get(_ADDRESS)) or sender
    if not method:
        raise SubscriptionError("empty callbackMethod and no submitting method to default to",
                                line=rec_el.sourceline, field="callbackMethod")
    if not address:
        raise SubscriptionError("empty callbackAddress and no sender address to default to",
                                line=rec_el.sourceline, field="callbackAddress")
    flist = parts.get(_FILTER_LIST)
    filters: list[ContentFilter] = []
    if flist is not None:
        for f in flist:
            tag = f.tag
            if tag == _CONTENT_FILTER:
                if len(filters) == limits.max_filters:
                    raise SubscriptionError(f"more than {limits.max_filters:,} contentFilters "
                                            "in one subscription (max_filters)",
                                            line=f.sourceline)
                filters.append(_content_filter(f, limits))
            elif tag == _CONCEPT_FILTER:
                raise SubscriptionError("conceptFilter is not specified by ADiWa and not "
                                        "supported", line=f.sourceline, field="conceptFilter")
    try:
        if flist is not None and len(parts) == 2:  # nothing optional: the usual case
            return Subscription.build(Receiver(method, address), filters, id=el.get("id"))
        return Subscription.build(
            Receiver(method, address), filters, id=el.get("id"),
            subscriber_id=_text_of(parts.get(_S + "subscriberId")),
            subscription_method=_text_of(parts.get(_S + "subscriptionMethod")),
            record_time=_text_of(parts.get(_S + "recordTime")),
            timeout_seconds=_timeout(parts.get(_TIMEOUT)))
    except XmlFilterError as exc:
        raise exc.located(line=el.sourceline) from None


def _prefixes(el: Any, text: str) -> dict[str, str] | None:
    """The namespace prefixes in scope at an element, its own declarations included, when
    ``text`` can use one (``nsmap`` walks the ancestors: only then)."""
    if ":" not in text:
        return None
    return {k: v for k, v in el.nsmap.items() if k}


def _content_filter(el: Any, limits: XmlLimits) -> ContentFilter:
    target_text = el.get("target", "")
    try:
        target = compile_target_checked(
            target_text, _prefixes(el, target_text) if ":" in target_text else None, limits)
    except XmlFilterError as exc:
        raise exc.located(line=el.sourceline) from None
    where = None if target.type_name is not None else target
    conds, nested = _parts(el, where, limits, 0)
    visible = None
    text = el.get("visibleAttributes")
    if text is not None:
        try:
            visible = compile_visible(text.replace(",", " ").split(), _prefixes(el, text),
                                      where, limits)
        except XmlFilterError as exc:
            raise exc.located(line=el.sourceline) from None
    return ContentFilter(target, dedupe(conds) if len(conds) > 1 else tuple(conds),
                         el.get("id"), nested, visible, text)


def _parts(el: Any, target: Any, limits: XmlLimits, depth: int
           ) -> tuple[list[Condition], tuple[NestedFilter, ...]]:
    """The conditions and nested filters of a (nested) content filter element."""
    conds: list[Condition] = []
    nested: dict[str, NestedFilter] | None = None
    most = limits.max_conditions
    # one plain pass over the children: an lxml tag filter costs a few microseconds to set up
    for c in el:
        tag = c.tag
        if tag == _CONDITION:
            if len(conds) + (len(nested) if nested else 0) == most:
                _too_many(c, limits)
            attribute = c.get("attribute", "")
            try:
                conds.append(make_condition(
                    attribute, c.get("operatorId", ""),
                    [v.text or "" for v in c if v.tag == _VALUE], c.get("quantifier"),
                    namespaces=_prefixes(c, attribute) if ":" in attribute else None,
                    target=target, limits=limits))
            except XmlFilterError as exc:
                raise exc.located(line=c.sourceline) from None
        elif tag == _CONTENT_FILTER:
            if len(conds) + (len(nested) if nested else 0) == most:
                _too_many(c, limits)
            if nested is None:
                nested = {}
            n = _nested(c, limits, depth + 1)
            nested.setdefault(n.key, n)
    return conds, tuple(nested.values()) if nested else ()


def _too_many(c: Any, limits: XmlLimits) -> None:
    raise SubscriptionError(f"more than {limits.max_conditions:,} conditions in one "
                            "contentFilter (max_conditions)", line=c.sourceline)


def _nested(el: Any, limits: XmlLimits, depth: int) -> NestedFilter:
    """A ``contentFilter`` inside a ``contentFilter`` (profile 2)."""
    line = el.sourceline
    if depth > limits.max_nesting:
        raise SubscriptionError(f"contentFilters nested more than {limits.max_nesting} deep "
                                "(max_nesting)", line=line, field="contentFilter")
    if el.get("visibleAttributes") is not None:
        raise SubscriptionError("visibleAttributes belongs on a top-level contentFilter",
                                line=line, field="visibleAttributes")
    text = el.get("target", "")
    try:
        _check_expression(text, limits)
        path = compile_path(text, _prefixes(el, text), None)
    except XmlFilterError as exc:
        raise exc.located(line=line) from None
    conds, nested = _parts(el, None, limits, depth)
    try:
        return NestedFilter(path, dedupe(conds), nested, text)
    except XmlFilterError as exc:
        raise exc.located(line=line) from None


def _check_expression(text: str, limits: XmlLimits) -> None:
    if len(text) > limits.max_expression:
        raise SubscriptionError(f"target of {len(text):,} characters, more than "
                                f"{limits.max_expression:,} (max_expression): {quoted(text)}")


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
        if s.subscription_method is not None:
            etree.SubElement(el, _S + "subscriptionMethod").text = s.subscription_method
        rec = etree.SubElement(el, _S + "receiver")
        etree.SubElement(rec, _S + "callbackMethod").text = s.receiver.method
        etree.SubElement(rec, _S + "callbackAddress").text = s.receiver.address
        if s.record_time is not None:
            etree.SubElement(el, _S + "recordTime").text = s.record_time
        if s.timeout_seconds is not None:
            etree.SubElement(el, _S + "timeoutInSeconds").text = str(s.timeout_seconds)
        fl = etree.SubElement(el, _S + "filterList")
        for f in s.filters:
            fe = etree.SubElement(fl, _F + "contentFilter", target=f.target.text)
            if f.id is not None:
                fe.set("id", f.id)
            if f.visible_text is not None:
                fe.set("visibleAttributes", f.visible_text)
            _write_parts(fe, f.conditions, f.nested)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


def _write_parts(fe: Any, conditions: Iterable[Condition],
                 nested: Iterable[NestedFilter]) -> None:
    for c in conditions:
        ce = etree.SubElement(fe, _F + "condition", attribute=c.attribute,
                              operatorId=c.operator.name, quantifier=c.quantifier)
        for v in c.values:
            etree.SubElement(ce, _F + "value").text = v
    for n in nested:
        ne = etree.SubElement(fe, _F + "contentFilter", target=n.text)
        _write_parts(ne, n.conditions, n.nested)
