"""The values ETCL evaluates ("anys"), and the one error that evaluation raises.

An any is a plain Python value: ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``,
``list``/``tuple`` (sequences), ``dict`` (anonymous structs, members in insertion order),
a :class:`Struct` (a named IDL struct) or a :class:`Union` (a discriminated union). The
evaluator walks them (component paths) and builds them (``$`` of a structured event,
``$curtime``), so they live here, below every user of the language; their JSON form and
the limits on decoding it belong to the channel layer (:mod:`siftbus.channel.values`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class EvalError(Exception):
    """An ETCL evaluation error. It never escapes a constraint: a constraint that errors
    on an event does not match it (``Constraint.explain`` says why)."""


@dataclass(frozen=True, slots=True)
class Struct:
    """A named IDL struct: members in order, with its type and repository ids."""

    type_id: str
    repos_id: str
    names: tuple[str, ...]
    values: tuple[Any, ...]

    def member(self, name: str) -> Any:
        """The member called ``name``; raises :class:`EvalError` if there is none."""
        try:
            return self.values[self.names.index(name)]
        except ValueError:
            raise EvalError(f"struct {self.type_id} has no member {name!r}") from None


@dataclass(frozen=True, slots=True)
class Union:
    """A discriminated union value: ``_d`` is ``discriminator``; ``member`` names the
    active branch; ``is_default`` says the active branch is the ``default`` label."""

    discriminator: Any
    value: Any
    member: str | None = None
    is_default: bool = False
    type_id: str | None = None
    repos_id: str | None = None


TIMET_UNIX_OFFSET = 122_192_928_000_000_000
"""100 ns intervals from the TimeBase epoch (1582-10-15) to the Unix epoch."""


def timet_from_unix_ns(ns: int) -> int:
    """``TimeBase::TimeT`` (100 ns units since 1582-10-15) of a Unix time in nanoseconds."""
    return ns // 100 + TIMET_UNIX_OFFSET


def utc_t(timet: int) -> Struct:
    """A ``TimeBase::UtcT`` struct (what ``$curtime`` denotes) for a TimeT."""
    return Struct("UtcT", "IDL:omg.org/TimeBase/UtcT:1.0", ("time", "inacclo", "inacchi", "tdf"),
                  (timet, 0, 0, 0))


def kind(v: Any) -> str:
    """What a value may be compared with: ``num`` (int, float), ``str``, ``bool`` or
    ``other`` (nothing)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "num"
    if isinstance(v, str):
        return "str"
    return "other"


__all__ = ["TIMET_UNIX_OFFSET", "EvalError", "Struct", "Union", "kind", "timet_from_unix_ns",
           "utc_t"]
