"""The interface of a typed event channel: a ``typing.Protocol`` whose methods return None.

The OMG TypedEventChannel carries calls of an interface ``I`` whose operations are
``void`` with only ``in`` parameters. Here ``I`` is a Protocol::

    class Thermo(Protocol):
        def reading(self, room: int, value: float) -> None: ...

:class:`Interface` reads it once (refusing what cannot travel: a result other than None,
``*args``/``**kwargs``, a parameter without an annotation, an annotation the channel
cannot check) and then checks each call: the operation exists, the arguments bind to its
signature, and each value fits its annotation (``int`` is not ``bool``; ``float`` takes an
int, as PEP 484 says; ``list[T]``, ``dict[str, T]``, unions, ``Optional``, ``Literal``,
``Any``).

A call travels as the specification maps a typed event to a structured one: domain ``""``,
type ``"%TYPED"``, event name ``""``, filterable data ``("operation", "Thermo::reading")``
followed by one property per parameter in declaration order. So structured and Any
consumers see typed events, ETCL filters read ``$operation`` and ``$room``, and a
structured event of that shape reaches typed consumers.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from siftbus.channel.event import StructuredEvent
from siftbus.errors import TypedEventError, UnknownOperation, excerpt

TYPED_TYPE = "%TYPED"
"""The structured event type of a typed event (domain and event name are empty)."""

OPERATION = "operation"
"""The first filterable property of a typed event: ``Interface::operation``."""

Check = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class TypedEvent:
    """One typed call: the interface, the operation and its arguments by name."""

    interface: str
    operation: str
    params: tuple[tuple[str, Any], ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)

    def to_structured(self) -> StructuredEvent:
        """The specification's mapping to a structured event."""
        return StructuredEvent("", TYPED_TYPE, "", (),
                               ((OPERATION, f"{self.interface}::{self.operation}"),
                                *self.params))

    @classmethod
    def from_structured(cls, event: StructuredEvent) -> TypedEvent | None:
        """The typed event a structured one stands for, or None if it is not one."""
        if event.type_name != TYPED_TYPE or not event.filterable_data:
            return None
        name, value = event.filterable_data[0]
        if name != OPERATION or not isinstance(value, str) or "::" not in value:
            return None
        interface, _, operation = value.rpartition("::")
        return cls(interface, operation, tuple(event.filterable_data[1:]))


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: its parameters (name, annotation text, check) in order."""

    name: str
    signature: inspect.Signature
    params: tuple[tuple[str, str, Check], ...]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_SIMPLE: dict[Any, Check] = {
    int: _is_int,
    float: lambda v: isinstance(v, float) or _is_int(v),
    bool: lambda v: isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    bytes: lambda v: isinstance(v, bytes),
    type(None): lambda v: v is None,
    None: lambda v: v is None,
    Any: lambda v: True,
}


def _show(ann: Any) -> str:
    if isinstance(ann, type):
        return ann.__name__
    return str(ann).replace("typing.", "")


def compile_check(ann: Any, where: str) -> Check:
    """A predicate for values of annotation ``ann``; TypedEventError if unsupported."""
    if ann in _SIMPLE:
        return _SIMPLE[ann]
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        parts = [compile_check(a, where) for a in args]
        return lambda v: any(p(v) for p in parts)
    if origin is typing.Literal:
        lits = args
        return lambda v: any(type(v) is type(x) and v == x for x in lits)
    if origin is list and len(args) == 1:
        item = compile_check(args[0], where)
        return lambda v: isinstance(v, list) and all(item(x) for x in v)
    if origin is dict and len(args) == 2 and args[0] is str:
        value = compile_check(args[1], where)
        return lambda v: (isinstance(v, dict) and all(isinstance(k, str) for k in v)
                          and all(value(x) for x in v.values()))
    raise TypedEventError(
        f"{where}: annotation {_show(ann)} is not one a typed channel can check (use int, "
        "float, bool, str, bytes, None, Any, list[T], dict[str, T], unions or Literal)")


class Interface:
    """A Protocol read as a typed channel's interface."""

    def __init__(self, protocol: type) -> None:
        if not isinstance(protocol, type) or not getattr(protocol, "_is_protocol", False):
            raise TypedEventError(f"a typed channel needs a typing.Protocol class, not "
                                  f"{excerpt(repr(protocol))}")
        self.protocol = protocol
        self.name = protocol.__name__
        ops: dict[str, Operation] = {}
        for attr, member in vars(protocol).items():
            if attr.startswith("_") or not inspect.isfunction(member):
                continue
            ops[attr] = self._operation(attr, member)
        if not ops:
            raise TypedEventError(f"{self.name} has no operations (public methods)")
        self.operations: Mapping[str, Operation] = ops

    def _operation(self, attr: str, fn: Any) -> Operation:
        where = f"{self.name}.{attr}"
        try:
            hints = typing.get_type_hints(fn, include_extras=False)
        except Exception as e:  # a forward reference that does not resolve
            raise TypedEventError(f"{where}: annotations do not resolve ({e})") from None
        if "return" not in hints or hints["return"] is not type(None):
            raise TypedEventError(f"{where} must return None (a typed event is one-way)")
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if not params or params[0].name != "self":
            raise TypedEventError(f"{where} must be a method taking self first")
        checks = []
        for p in params[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypedEventError(f"{where}: *args and **kwargs cannot be typed events")
            if p.name == OPERATION:
                raise TypedEventError(f"{where}: a parameter may not be called {OPERATION!r}")
            if p.name not in hints:
                raise TypedEventError(f"{where}: parameter {p.name!r} has no annotation")
            ann = hints[p.name]
            checks.append((p.name, _show(ann), compile_check(ann, f"{where}({p.name})")))
        return Operation(attr, sig, tuple(checks))

    def operation(self, name: str) -> Operation:
        op = self.operations.get(name)
        if op is None:
            raise UnknownOperation(
                f"{self.name} has no operation {excerpt(repr(name))} "
                f"(it has: {', '.join(sorted(self.operations))})", field=name)
        return op

    def call(self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> TypedEvent:
        """Check one call and make its typed event; TypedEventError if it does not fit."""
        op = self.operation(name)
        try:
            bound = op.signature.bind(None, *args, **kwargs)
        except TypeError as e:
            raise TypedEventError(f"{self.name}.{name}(): {e}", field=name) from None
        bound.apply_defaults()
        values = []
        for pname, shown, check in op.params:
            v = bound.arguments[pname]
            if not check(v):
                raise TypedEventError(
                    f"{self.name}.{name}(): parameter {pname!r} must be {shown}, not "
                    f"{type(v).__name__} ({excerpt(repr(v))})", field=pname)
            values.append((pname, v))
        return TypedEvent(self.name, name, tuple(values))

    def accepts(self, event: TypedEvent) -> bool:
        """Whether a received typed event is a call of this interface that fits it."""
        if event.interface != self.name or event.operation not in self.operations:
            return False
        op = self.operations[event.operation]
        if [n for n, _ in event.params] != [n for n, _, _ in op.params]:
            return False
        return all(check(v) for (_, v), (_, _, check) in zip(event.params, op.params,
                                                              strict=True))


__all__ = ["OPERATION", "TYPED_TYPE", "Interface", "Operation", "TypedEvent",
           "compile_check"]
