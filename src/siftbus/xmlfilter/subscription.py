"""ADiWa subscriptions: value objects, digests and the builder API.

A subscription is one receiver and a disjunction of content filters; a content filter is a
target (where an event starts, or ``#Type`` for an event type of the hierarchy) and a
conjunction of conditions (attribute path, operator, quantifier, values) and of nested
filters (profile 2), with optionally the parts of the event its notification carries
(``visibleAttributes``). Documents are read by :mod:`siftbus.xmlfilter.document`.

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
from typing import Any, Literal

from siftbus.errors import SubscriptionError
from siftbus.xmlfilter.limits import DEFAULT_LIMITS, XmlLimits, quoted
from siftbus.xmlfilter.operators import OperatorSpec, lookup, normalise_values
from siftbus.xmlfilter.xpath import RelPath, Target, compile_path, compile_target

SUBSCRIPTION_NS = "http://www.adiwa.net/subscription/1.0"
FILTER_NS = "http://www.adiwa.net/filter/1.0"

Quantifier = Literal["all", "any"]

#: the longest ``timeoutInSeconds`` accepted: 100 years
MAX_TIMEOUT = 100 * 365 * 24 * 3600



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
    #: the canonical spelling, computed once (digests and de-duplication use it)
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", "|".join((self.path.canonical(), self.operator.name,
                                                  self.quantifier, *self.values)))

    def canonical(self) -> str:
        return self.key


def _conditions(specs: Iterable[Sequence[Any]], namespaces: Mapping[str, str] | None,
                target: Target | None) -> tuple[Condition, ...]:
    conds = []
    for spec in specs:
        if len(spec) not in (3, 4):
            raise SubscriptionError("a condition is (attribute, operatorId, values[, quantifier])")
        values = (spec[2],) if isinstance(spec[2], str) else tuple(spec[2])
        conds.append(make_condition(spec[0], spec[1], values,
                                    spec[3] if len(spec) == 4 else None,
                                    namespaces=namespaces, target=target))
    return dedupe(conds)


@dataclass(frozen=True, slots=True)
class NestedFilter:
    """A filter inside a content filter (profile 2, thesis Listing 7): a conjunct of the
    enclosing filter that holds when **some** element its ``path`` selects below the
    enclosing event (or nested element) satisfies all its conditions and nested filters.
    The notification of a subscription matched through it carries only those of the
    selected elements that satisfy it (the others are removed from the event)."""

    path: RelPath
    conditions: tuple[Condition, ...]
    nested: tuple[NestedFilter, ...] = ()
    #: the target as written
    text: str = ""
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.path.attribute is not None or not self.path.steps:
            raise SubscriptionError(f"a nested filter's target must select elements below "
                                    f"the event, got {quoted(self.text or self.path.key)}",
                                    field="target")
        inner = sorted([c.canonical() for c in self.conditions]
                       + [n.key for n in self.nested])
        object.__setattr__(self, "key", f"nested {self.path.key}{{{';'.join(inner)}}}")

    @staticmethod
    def build(path: str, conditions: Iterable[Sequence[Any]] = (), *,
              nested: Iterable[NestedFilter] = (),
              namespaces: Mapping[str, str] | None = None) -> NestedFilter:
        """A nested filter from text; its condition paths are relative to the elements its
        ``path`` selects (``#content`` is the element itself)."""
        _check_size("nested target", path, DEFAULT_LIMITS.max_expression, "max_expression")
        return NestedFilter(compile_path(path, namespaces, None),
                            _conditions(conditions, namespaces, None),
                            _dedupe_nested(nested), path)


def _dedupe_nested(nested: Iterable[NestedFilter]) -> tuple[NestedFilter, ...]:
    seen: dict[str, NestedFilter] = {}
    for n in nested:
        seen.setdefault(n.key, n)
    return tuple(seen.values())


@dataclass(frozen=True, slots=True)
class ContentFilter:
    """A target and a conjunction of conditions (distinct; a repeated one counts once) and
    nested filters; ``visible`` (``visibleAttributes``), when given, are the parts of the
    event the notification carries (paths relative to the event root)."""

    target: Target
    conditions: tuple[Condition, ...]
    id: str | None = None
    nested: tuple[NestedFilter, ...] = ()
    visible: tuple[RelPath, ...] | None = None
    #: ``visibleAttributes`` as written
    visible_text: str | None = field(default=None, compare=False)
    _key: str = field(default="", init=False, compare=False, repr=False)

    @staticmethod
    def build(
        target: str,
        conditions: Iterable[Sequence[Any]] = (),
        *,
        namespaces: Mapping[str, str] | None = None,
        id: str | None = None,
        nested: Iterable[NestedFilter] = (),
        visible: Iterable[str] | None = None,
    ) -> ContentFilter:
        """Compile a filter from text: conditions as ``(attribute, operatorId, values)``
        or ``(attribute, operatorId, values, quantifier)``; ``visible`` as attribute paths
        (``visibleAttributes``)."""
        t = compile_target_checked(target, namespaces)
        where = None if t.type_name is not None else t
        texts = None if visible is None else list(visible)
        vis = None if texts is None else compile_visible(texts, namespaces, where)
        return ContentFilter(t, _conditions(conditions, namespaces, where), id,
                             _dedupe_nested(nested), vis,
                             None if texts is None else " ".join(texts))

    @property
    def has_view(self) -> bool:
        """Does the notification carry less than the whole event?"""
        return bool(self.nested) or self.visible is not None

    def canonical(self) -> str:
        key = self._key
        if not key:
            inner = sorted([c.canonical() for c in self.conditions]
                           + [n.key for n in self.nested])
            key = self.target.canonical() + "{" + ";".join(inner) + "}"
            if self.visible is not None:
                key += "visible(" + " ".join(sorted(p.key for p in self.visible)) + ")"
            object.__setattr__(self, "_key", key)
        return key


def compile_visible(paths: Sequence[str], namespaces: Mapping[str, str] | None,
                    target: Target | None, limits: XmlLimits = DEFAULT_LIMITS
                    ) -> tuple[RelPath, ...]:
    """``visibleAttributes``: attribute paths relative to the event root (as a condition's),
    each an element (with its subtree) or an attribute the notification keeps."""
    if not paths:
        raise SubscriptionError("visibleAttributes names no path", field="visibleAttributes")
    if len(paths) > limits.max_conditions:
        raise SubscriptionError(f"more than {limits.max_conditions:,} visibleAttributes "
                                "(max_conditions)", field="visibleAttributes")
    out: dict[str, RelPath] = {}
    for text in paths:
        _check_size("visible attribute", text, limits.max_expression, "max_expression")
        p = compile_path(text, namespaces, target)
        out.setdefault(p.key, p)
    return tuple(out.values())


def dedupe(conds: Iterable[Condition]) -> tuple[Condition, ...]:
    seen: dict[str, Condition] = {}
    for c in conds:
        seen.setdefault(c.canonical(), c)
    return tuple(seen.values())


def _check_size(what: str, text: str, limit: int, name: str) -> None:
    if len(text) > limit:
        raise SubscriptionError(f"{what} of {len(text):,} characters, more than {limit:,} "
                                f"({name}): {quoted(text)}")


#: compiled targets and conditions by their text and context: documents repeat them (the
#: same attribute under the same target in thousands of subscriptions), and the compiled
#: values are immutable, so they are shared. Bounded: cleared when full.
_COMPILED: dict[tuple[Any, ...], Any] = {}
_COMPILED_MAX = 65_536


def _ns_key(text: str, namespaces: Mapping[str, str] | None) -> Any:
    """What of the namespaces can change the meaning of ``text`` (only prefixes can)."""
    return frozenset(namespaces.items()) if namespaces and ":" in text else None


def _remember(key: tuple[Any, ...], value: Any) -> Any:
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.clear()
    _COMPILED[key] = value
    return value


def compile_target_checked(text: str, namespaces: Mapping[str, str] | None,
                           limits: XmlLimits = DEFAULT_LIMITS) -> Target:
    """:func:`compile_target` after the ``max_expression`` check (memoised)."""
    _check_size("target", text, limits.max_expression, "max_expression")
    key = ("t", text, _ns_key(text, namespaces))
    hit = _COMPILED.get(key)
    return hit if hit is not None else _remember(key, compile_target(text, namespaces))


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
    if len(attribute) > limits.max_expression:
        _check_size("attribute path", attribute, limits.max_expression, "max_expression")
    if len(values) > limits.max_values:
        raise SubscriptionError(f"{len(values):,} values in one condition, more than "
                                f"{limits.max_values:,} (max_values)", field="value")
    longest = limits.max_value
    for v in values:
        if len(v) > longest:
            _check_size("value", v, longest, "max_value")
    vals = tuple(values)
    # the target matters only to an absolute path (its steps may be stripped)
    where = target.key if target is not None and attribute.lstrip()[:1] == "/" else None
    key = ("c", attribute, operator_id, vals, quantifier, _ns_key(attribute, namespaces),
           where)
    hit = _COMPILED.get(key)
    if hit is not None:
        return hit
    spec = lookup(operator_id)
    q = quantifier or "all"
    if q not in ("all", "any"):
        raise SubscriptionError(f"quantifier must be 'all' or 'any', got {quoted(q)}",
                                field="quantifier")
    pkey = ("p", attribute, key[5], where)
    path = _COMPILED.get(pkey)
    if path is None:
        path = _remember(pkey, compile_path(attribute, namespaces, target))
    return _remember(key, Condition(attribute, path, spec, normalise_values(spec, vals),
                                    q))  # type: ignore[arg-type]


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
        subscription_method: str | None = None,
        record_time: str | None = None,
        timeout_seconds: int | None = None,
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
        return Subscription(id or "sub-" + digest[:16], rec, fs, subscriber_id,
                            subscription_method, record_time, timeout_seconds, digest=digest)

    def canonical(self) -> str:
        parts = [self.receiver.method, self.receiver.address, self.subscriber_id or ""]
        parts.extend(sorted({f.canonical() for f in self.filters}))
        return "\n".join(parts)


def _digest(rec: Receiver, fs: tuple[ContentFilter, ...], subscriber: str | None) -> str:
    parts = [rec.method, rec.address, subscriber or ""]
    parts.extend(sorted({f.canonical() for f in fs}))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
