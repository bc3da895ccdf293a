"""Attribute domains: finite ordered (int, decimal, enum) and unordered strings.

Every ordered value has an integer *key* that preserves order: the integer itself, the
decimal scaled by ``10**places``, or the enum ordinal. Matching, covering, the index and
the Spark stage all work on keys, so a range test is two integer comparisons whatever
the domain. Strings are their own key and support only =, !=, prefix and set membership.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from siftbus.errors import DomainError, SchemaError, excerpt
from siftbus.model.kinds import OPEN_KINDS, OpenDomain

Key = int | str
"""A domain key: ``int`` for ordered domains, ``str`` for string domains."""

Value = int | Decimal | str | float | bool
"""A user-facing attribute value: int, Decimal (decimal domains) or str (enum label, string)."""


@runtime_checkable
class Domain(Protocol):
    """The set of values one attribute can take."""

    @property
    def ordered(self) -> bool:
        """Whether <, <=, >, >= and ranges apply."""

    @property
    def spec(self) -> str:
        """The schema-file spelling, e.g. ``int[0,999]``."""

    def key(self, value: object) -> Key:
        """Check ``value`` and return its key; raises :class:`DomainError`."""

    def value(self, key: Key) -> Value:
        """The user-facing value of a key."""

    def literal(self, key: Key) -> str:
        """The key written as a profile-language literal."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """A value for an error message: short, whatever its size."""
    return excerpt(repr(value) if isinstance(value, str) else str(value), 60)


@dataclass(frozen=True, slots=True)
class IntDomain:
    """Integers ``lo..hi`` inclusive."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.lo > self.hi:
            raise SchemaError(f"empty integer domain int[{self.lo},{self.hi}]: lo > hi")

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return f"int[{self.lo},{self.hi}]"

    @property
    def min_key(self) -> int:
        return self.lo

    @property
    def max_key(self) -> int:
        return self.hi

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1

    def key(self, value: object) -> int:
        if _is_int(value):
            v = int(value)  # type: ignore[call-overload]
        elif isinstance(value, Decimal | float) and not isinstance(value, bool):
            if not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
                raise DomainError(f"{value} is not a finite number (domain {self.spec})")
            # compare before int(): int(Decimal("1e999999999")) would build a huge number
            if not self.lo <= value <= self.hi:
                raise DomainError(f"{_shown(value)} is outside the domain {self.spec}")
            if value != int(value):
                raise DomainError(f"{_shown(value)} is not an integer (domain {self.spec})")
            v = int(value)
        else:
            raise DomainError(f"{_shown(value)} is not an integer (domain {self.spec})")
        if not self.lo <= v <= self.hi:
            raise DomainError(f"{_shown(v)} is outside the domain {self.spec}")
        return v

    def value(self, key: Key) -> int:
        assert isinstance(key, int)
        return key

    def literal(self, key: Key) -> str:
        return str(key)


@dataclass(frozen=True, slots=True)
class DecimalDomain:
    """Fixed-point decimals ``lo..hi`` in steps of ``10**-places``; keys are scaled ints."""

    lo: Decimal
    hi: Decimal
    places: int

    def __post_init__(self) -> None:
        if not 0 <= self.places <= 12:
            raise SchemaError(f"decimal places must be 0..12, got {self.places}")
        if self.lo > self.hi:
            raise SchemaError(f"empty decimal domain {self.spec}: lo > hi")
        for bound in (self.lo, self.hi):
            try:
                exact = bound == bound.quantize(self._quantum)
            except InvalidOperation:  # more digits than a decimal context holds (28)
                raise SchemaError(f"bound {_shown(bound)} has too many digits") from None
            if not exact:
                raise SchemaError(f"bound {bound} has more than {self.places} decimal places")

    @property
    def ordered(self) -> bool:
        return True

    @property
    def _quantum(self) -> Decimal:
        return Decimal(1).scaleb(-self.places)

    @property
    def spec(self) -> str:
        return f"decimal[{self.lo},{self.hi},{self.places}]"

    @property
    def scale(self) -> int:
        return 10**self.places

    @property
    def min_key(self) -> int:
        return int(self.lo.scaleb(self.places))

    @property
    def max_key(self) -> int:
        return int(self.hi.scaleb(self.places))

    @property
    def size(self) -> int:
        return self.max_key - self.min_key + 1

    def round(self, value: object) -> Decimal:
        """Round to the domain's places, half away from zero (as people round)."""
        if isinstance(value, bool):
            raise DomainError(f"{value!r} is not a number (domain {self.spec})")
        if isinstance(value, float):
            value = Decimal(repr(value))  # shortest repr, not the binary expansion
        if not isinstance(value, Decimal | int):
            raise DomainError(f"{_shown(value)} is not a number (domain {self.spec})")
        d = Decimal(value)
        if not d.is_finite():
            raise DomainError(f"{value} is not a finite number (domain {self.spec})")
        # far outside the domain (1e999999999): say so, rounding it could not succeed
        if not self.lo - 1 <= d <= self.hi + 1:
            raise DomainError(f"{_shown(value)} is outside the domain {self.spec}")
        try:
            return d.quantize(self._quantum, rounding=ROUND_HALF_UP)
        except InvalidOperation as exc:  # more digits than the context's precision
            raise DomainError(f"{_shown(value)} has too many digits (domain {self.spec})") \
                from exc

    def key(self, value: object) -> int:
        d = self.round(value)
        if not self.lo <= d <= self.hi:
            raise DomainError(f"{_shown(value)} is outside the domain {self.spec}")
        return int(d.scaleb(self.places))

    def value(self, key: Key) -> Decimal:
        assert isinstance(key, int)
        return Decimal(key).scaleb(-self.places)

    def literal(self, key: Key) -> str:
        assert isinstance(key, int)
        text = f"{self.value(key):.{self.places}f}"
        # A decimal literal always shows a point, so it never reads as an int literal.
        return text if "." in text else text + ".0"


@dataclass(frozen=True, slots=True)
class EnumDomain:
    """An ordered enumeration; labels compare in the order they are declared.

    Any identifier is a label, ``MIN`` and ``MAX`` included (``enum[LOW,MID,HIGH,MAX]``):
    inside a profile a declared label wins over the domain bound of the same name.
    """

    labels: tuple[str, ...]
    _ordinal: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.labels:
            raise SchemaError("an enum needs at least one label")
        ordinal = {label: i for i, label in enumerate(self.labels)}
        if len(ordinal) != len(self.labels):
            twice = sorted(x for x, n in Counter(self.labels).items() if n > 1)
            raise SchemaError(f"enum labels repeat: {excerpt(', '.join(twice))}")
        for label in self.labels:
            if not _IDENT.fullmatch(label) or label in _NOT_LABELS:
                raise SchemaError(f"enum label {_shown(label)} is not a plain identifier")
        object.__setattr__(self, "_ordinal", ordinal)

    @property
    def ordered(self) -> bool:
        return True

    @property
    def spec(self) -> str:
        return f"enum[{','.join(self.labels)}]"

    @property
    def min_key(self) -> int:
        return 0

    @property
    def max_key(self) -> int:
        return len(self.labels) - 1

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def ordinals(self) -> Mapping[str, int]:
        """The key of each label (read-only: a view of the domain's own table)."""
        return MappingProxyType(self._ordinal)

    def key(self, value: object) -> int:
        if isinstance(value, str):
            ordinal = self._ordinal.get(value)
            if ordinal is not None:
                return ordinal
        raise DomainError(f"{_shown(value)} is not one of {excerpt(self.spec, 120)}")

    def value(self, key: Key) -> str:
        assert isinstance(key, int)
        return self.labels[key]

    def literal(self, key: Key) -> str:
        return self.value(key)


@dataclass(frozen=True, slots=True)
class StringDomain:
    """Unordered strings: =, !=, prefix and set membership only."""

    @property
    def ordered(self) -> bool:
        return False

    @property
    def spec(self) -> str:
        return "string"

    def key(self, value: object) -> str:
        if not isinstance(value, str):
            raise DomainError(f"{_shown(value)} is not a string")
        return value

    def value(self, key: Key) -> str:
        assert isinstance(key, str)
        return key

    def literal(self, key: Key) -> str:
        assert isinstance(key, str)
        return quote_string(key)


OrderedDomain = IntDomain | DecimalDomain | EnumDomain | OpenDomain
AnyDomain = IntDomain | DecimalDomain | EnumDomain | StringDomain | OpenDomain
ClassicDomain = (IntDomain, DecimalDomain, EnumDomain, StringDomain)
"""The finite kinds (and string) every engine's compiled path handles."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_WORDS = frozenset({"MIN", "MAX", "in", "IN", "prefix", "exists", "TYPE", "type",
                            "not", "or", "suffix", "contains", "like", "matches", "cidr"})
"""Words that cannot name an event type or attribute (a profile could not be read)."""
_NOT_LABELS = RESERVED_WORDS - {"MIN", "MAX"}
# MIN and MAX are labels like any other; a declared label wins over the bound in a profile

_NUM = r"-?\d+(?:\.\d+)?"
_SPEC_INT = re.compile(r"int\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
_SPEC_DEC = re.compile(rf"decimal\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*(\d+)\s*\]")
_SPEC_ENUM = re.compile(r"enum\[\s*([^\]]*)\]")
MAX_SPEC_NUMBER = 40
"""Longest number in a type spec (characters): int() and Decimal work on any length, but
no domain needs more, and a bound of 5000 digits would exceed Python's int() limit."""
_LONG_NUMBER = re.compile(rf"(?<![0-9.A-Za-z_])[-0-9.]{{{MAX_SPEC_NUMBER + 1}}}")


def is_identifier(name: str) -> bool:
    """Whether ``name`` may name an event type, attribute or enum label."""
    return bool(_IDENT.fullmatch(name)) and name not in RESERVED_WORDS


def parse_domain(spec: str) -> AnyDomain:
    """Parse a schema type spec: ``int[lo,hi]``, ``decimal[lo,hi,places]``,
    ``enum[A,B,C]`` or ``string``."""
    text = spec.strip()
    if len(text) > MAX_SPEC_NUMBER and _LONG_NUMBER.search(text):
        raise SchemaError(f"a number in {_shown(spec)} is longer than {MAX_SPEC_NUMBER} "
                          "characters")
    if text == "string":
        return StringDomain()
    if text in OPEN_KINDS:
        return OPEN_KINDS[text]
    if m := _SPEC_INT.fullmatch(text):
        return IntDomain(int(m[1]), int(m[2]))
    if m := _SPEC_DEC.fullmatch(text):
        return DecimalDomain(Decimal(m[1]), Decimal(m[2]), int(m[3]))
    if m := _SPEC_ENUM.fullmatch(text):
        labels = tuple(label.strip() for label in m[1].split(","))
        return EnumDomain(labels)
    raise SchemaError(
        f"unknown type {spec!r}: expected int[lo,hi], decimal[lo,hi,places], "
        "enum[A,B,...], string, int, float, bool, timestamp or ip"
    )


def quote_string(text: str) -> str:
    """A double-quoted profile-language string literal (JSON escaping)."""
    import json

    return json.dumps(text, ensure_ascii=False)
