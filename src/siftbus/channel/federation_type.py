"""The broker-network event type of a federated channel, and its consumers' interest.

A federated channel's events cross the broker network as events of one fixed type (the
network's schema holds it; every broker must know it before it starts)::

    domain_name, type_name, event_name        the fixed header (strings)
    f<i>k, f<i>n, f<i>s, f<i>b                per declared field ``$name``: its kind,
                                              number key, string key, boolean key
                                              (the keys of lang/etcl/profiles.py)
    keyed                                     1; 0 when a number has no exact key
    body                                      the whole structured event (JSON)

A consumer-side ETCL constraint that compiles (lang/etcl/profiles.py) and uses only the
fixed header and declared fields becomes profiles over that type, exactly the events the
evaluator would pass; any other constraint, and a proxy that passes everything, becomes
the catch-all profile of the type. Events whose numbers have no exact key travel with
``keyed = 0``, which every member subscribes to. So the network delivers a superset of
what a consumer's broker needs, never less, and the exact ETCL check (with the admins'
InterFilterGroupOperator, QoS and persistence) is the consumer's broker's own channel.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from siftbus.channel.event import StructuredEvent
from siftbus.channel.filter import Filter
from siftbus.channel.node import Node
from siftbus.channel.qos import AND_OP
from siftbus.errors import ChannelError
from siftbus.lang.etcl import parse_constraint
from siftbus.lang.etcl.profiles import (
    NUM_ABSENT,
    NUM_MAX,
    UNREPRESENTABLE,
    FieldRef,
    compile_constraint,
    field_keys,
    field_value,
    variant_constraints,
)
from siftbus.model import Event, EventType, IntervalSet, Profile, Schema
from siftbus.model.domain import IntDomain, StringDomain
from siftbus.model.schema import Attribute

_FIXED = ("domain_name", "type_name", "event_name")
COARSE = 2
"""Number keys travel shifted right by this many bits: the covering index subtracts
domain bounds in int64, which the full key range (about 2**64 wide) would overflow.
Flooring keeps the order, so a compiled interval still covers every key it held (the
network may bring a few more events; the consumer's broker checks exactly)."""

_ASPECTS: dict[str, IntDomain | StringDomain] = {
    "k": IntDomain(0, 4), "n": IntDomain(NUM_ABSENT >> COARSE, NUM_MAX >> COARSE),
    "s": StringDomain(), "b": IntDomain(0, 2)}

Constraints = list[tuple[str, tuple[tuple[str, str], ...]]]
"""(constraint text, event types) of one node's filters."""


class FederatedType:
    """The network event type of one federated channel (``name``, declared ``fields``)."""

    def __init__(self, name: str, fields: Sequence[str]) -> None:
        if len(set(fields)) != len(fields):
            raise ChannelError("a federated channel's fields must be distinct")
        self.name = name
        self.fields = tuple(FieldRef("var", f) for f in fields)
        attrs: list[Attribute] = []
        self._attr: dict[Any, str] = {}
        for n in _FIXED:
            self._attr[("fixed", n)] = n
            attrs.append(Attribute(n, StringDomain(), len(attrs)))
        for i, f in enumerate(self.fields):
            for aspect, dom in _ASPECTS.items():
                self._attr[(f, aspect)] = f"f{i}{aspect}"
                attrs.append(Attribute(f"f{i}{aspect}", dom, len(attrs)))
        attrs.append(Attribute("keyed", IntDomain(0, 1), len(attrs)))
        attrs.append(Attribute("body", StringDomain(), len(attrs)))
        self.etype = EventType(name, tuple(attrs))

    def schema(self, *others: EventType) -> Schema:
        """A network schema holding this type (and ``others``)."""
        return Schema((*others, self.etype))

    def event(self, ev: StructuredEvent) -> Event:
        """The network event of a structured event."""
        keys: list[Any] = [ev.domain_name, ev.type_name, ev.event_name]
        keyed = 1
        for f in self.fields:
            k, n, s, b = field_keys(field_value(ev, f))
            if n is UNREPRESENTABLE:
                keyed, n = 0, NUM_ABSENT
            keys += [k, n >> COARSE, s, b]
        keys += [keyed, ev.to_json()]
        return Event(self.etype, tuple(keys))

    def structured(self, ev: Event) -> StructuredEvent:
        """The structured event a network event carries."""
        return StructuredEvent.from_json(str(ev.keys[-1]))

    def catch_all(self, key: str) -> Profile:
        return Profile.from_constraints(f"{key}.all", self.etype, {})

    def unkeyed(self, key: str) -> Profile:
        """The profile of events that must skip the routing's number tests."""
        return Profile.from_constraints(f"{key}.unkeyed", self.etype,
                                        {"keyed": IntervalSet.range(0, 0)})

    def compile(self, key: str, constraints: Constraints) -> list[Profile] | None:
        """Profiles of the events passing any of ``constraints``; None if one does not
        compile to this type (the caller then asks for everything)."""
        out: list[Profile] = []
        for n, (text, types) in enumerate(constraints):
            variants = compile_constraint(parse_constraint(text), types)
            if variants is None:
                return None
            for m, variant in enumerate(variants):
                cons = variant_constraints(variant)
                if any(ak not in self._attr for ak in cons):
                    return None
                if any(c.empty for c in cons.values()):
                    continue
                named = {self._attr[ak]: _coarse(c) if ak[1] == "n" else c
                         for ak, c in cons.items()}
                out.append(Profile.from_constraints(f"{key}.{n}.{m}", self.etype, named))
        return out


def _coarse(c: Any) -> IntervalSet:
    return IntervalSet.of((lo >> COARSE, hi >> COARSE) for lo, hi in c.intervals)


def node_constraints(node: Node) -> Constraints | None:
    """The (text, event types) of every constraint of a node's filters; None when the
    node has no filters (it passes everything)."""
    ids = node.get_all_filters()
    if not ids:
        return None
    out: Constraints = []
    for fid in ids:
        f: Filter = node.get_filter(fid)
        for info in f.get_all_constraints():
            exp = info.constraint_expression
            out.append((exp.constraint_expr, tuple((d, t) for d, t in exp.event_types)))
    return out


def _key(prefix: str, constraints: Constraints) -> str:
    digest = hashlib.sha1(repr(sorted(constraints)).encode(), usedforsecurity=False)
    return f"{prefix}{digest.hexdigest()[:16]}"


def interest(ftype: FederatedType, prefix: str,
             nodes: Iterable[tuple[str, Node, Node]]) -> dict[str, Profile]:
    """The profiles covering every consumer: ``nodes`` = (operator, admin, proxy).

    AND_OP: the proxy's filters if they compile, else the admin's, else everything (one
    side already bounds what passes); OR_OP: both sides (everything if either has no
    filters). Identical interests share profile ids."""
    out: dict[str, Profile] = {}
    everything = False
    for op, admin, proxy in nodes:
        a, p = node_constraints(admin), node_constraints(proxy)
        choices: list[Constraints | None]
        choices = [p, a] if op == AND_OP else [None if a is None or p is None else a + p]
        for cons in choices:
            if cons is None:
                continue
            key = _key(prefix, cons)
            profiles = ftype.compile(key, cons)
            if profiles is not None:
                out.update((pr.id, pr) for pr in profiles)
                break
        else:
            everything = True
    if everything:
        return {f"{prefix}.all": ftype.catch_all(prefix)}
    unkeyed = ftype.unkeyed(prefix)
    out[unkeyed.id] = unkeyed
    return out


__all__ = ["COARSE", "Constraints", "FederatedType", "interest", "node_constraints"]
