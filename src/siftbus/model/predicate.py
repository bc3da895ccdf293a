"""A single condition as a user writes it, and its meaning as a constraint."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from siftbus.errors import DomainError, ProfileError
from siftbus.model.constraint import Constraint, IntervalSet, StringConstraint
from siftbus.model.domain import AnyDomain, StringDomain, Value
from siftbus.model.kinds import IpDomain, cidr_interval


class Op(enum.Enum):
    """Condition operators of the profile language."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    RANGE = "in []"
    IN = "in {}"
    PREFIX = "prefix"
    EXISTS = "exists"
    SUFFIX = "suffix"
    CONTAINS = "contains"
    LIKE = "like"
    MATCHES = "matches"
    CIDR = "cidr"


STRING_OPS = frozenset({Op.SUFFIX, Op.CONTAINS, Op.LIKE, Op.MATCHES})
"""Operators evaluated as checks (``model.checks``), never as constraints."""
NEGATABLE = frozenset({Op.IN, Op.RANGE, Op.PREFIX, Op.EXISTS, Op.CIDR} | STRING_OPS)
"""Operators ``not`` may precede (anything-but)."""
NOCASE = frozenset({Op.EQ, Op.PREFIX, Op.SUFFIX})
"""Operators ``ignorecase`` may follow."""


class Extreme(enum.Enum):
    """``MIN``/``MAX``: the smallest and largest value of an ordered domain."""

    MIN = "MIN"
    MAX = "MAX"

    def __repr__(self) -> str:
        return self.value


Operand = Value | Extreme

_ORDERED_ONLY = {Op.LT, Op.LE, Op.GT, Op.GE, Op.RANGE}
_ARITY = {Op.RANGE: 2, Op.EXISTS: 0}
# a negated EXISTS is "not exists"; a negated set, range or cidr is its complement


@dataclass(frozen=True, slots=True)
class Predicate:
    """One condition ``attr op operands`` as written; :meth:`constraint` gives its meaning."""

    attr: str
    op: Op
    operands: tuple[Operand, ...] = ()
    negated: bool = False
    """``not`` before the operator: anything-but (a present value that fails the test)."""
    nocase: bool = False
    """``ignorecase`` after the operand (=, prefix and suffix on strings)."""

    def __post_init__(self) -> None:
        if self.negated and self.op not in NEGATABLE:
            raise ProfileError(f"{self.attr}: 'not' cannot precede {self.op.value}")
        if self.nocase and self.op not in NOCASE:
            raise ProfileError(f"{self.attr}: 'ignorecase' applies to =, prefix and suffix "
                               f"only, not {self.op.value}")
        want = _ARITY.get(self.op, 1)
        if self.op is Op.IN:
            if not self.operands:
                raise ProfileError(f"{self.attr} in {{}}: the set is empty")
        elif len(self.operands) != want:
            raise ProfileError(f"{self.op.value} takes {want} operand(s), got {len(self.operands)}")

    @property
    def is_check(self) -> bool:
        """Whether only a check (``model.checks``) expresses it, not a constraint."""
        return (self.op in STRING_OPS or self.nocase
                or (self.negated and self.op in (Op.PREFIX, Op.EXISTS)))

    def constraint(self, domain: AnyDomain) -> Constraint:
        """The keys this condition accepts in ``domain``; raises on a misuse or a bad value."""
        if self.is_check:
            raise ProfileError(f"{self.attr}: {self.op.value} is a check, not a constraint")
        if self.negated:
            plain = Predicate(self.attr, self.op, self.operands).constraint(domain)
            if isinstance(plain, StringConstraint):
                assert plain.allowed is not None  # in {...}: the only negatable string set
                return StringConstraint.make(None, "", plain.allowed)
            return plain.complement(domain.min_key, domain.max_key)  # type: ignore[union-attr]
        if self.op is Op.CIDR:
            if not isinstance(domain, IpDomain):
                raise ProfileError(f"{self.attr}: cidr applies only to ip attributes, "
                                   f"not {domain.spec}")
            return IntervalSet.range(*cidr_interval(self.operands[0]))
        if isinstance(domain, StringDomain):
            return self._string_constraint(domain)
        if self.op is Op.PREFIX:
            raise ProfileError(f"{self.attr}: prefix applies only to string attributes, "
                               f"not {domain.spec}")
        lo, hi = domain.min_key, domain.max_key
        if self.op is Op.EXISTS:
            return IntervalSet.range(lo, hi)
        keys = [self._key(domain, v) for v in self.operands]
        op = self.op
        if op is Op.EQ:
            return IntervalSet.range(keys[0], keys[0])
        if op is Op.NE:
            return IntervalSet.range(keys[0], keys[0]).complement(lo, hi)
        if op is Op.LT:
            return IntervalSet.range(lo, keys[0] - 1)
        if op is Op.LE:
            return IntervalSet.range(lo, keys[0])
        if op is Op.GT:
            return IntervalSet.range(keys[0] + 1, hi)
        if op is Op.GE:
            return IntervalSet.range(keys[0], hi)
        if op is Op.RANGE:
            if keys[0] > keys[1]:
                raise ProfileError(
                    f"{self.attr} in [{self.operands[0]}, {self.operands[1]}]: "
                    "lower bound is above upper bound")
            return IntervalSet.range(keys[0], keys[1])
        assert op is Op.IN
        return IntervalSet.points(keys)

    def _key(self, domain: AnyDomain, value: Operand) -> int:
        assert not isinstance(domain, StringDomain)
        if value is Extreme.MIN:
            return domain.min_key
        if value is Extreme.MAX:
            return domain.max_key
        try:
            key = domain.key(value)
        except DomainError as exc:
            raise DomainError(f"{self.attr}: {exc.message}") from None
        assert isinstance(key, int)
        return key

    def _string_constraint(self, domain: StringDomain) -> StringConstraint:
        op = self.op
        if op in _ORDERED_ONLY:
            raise ProfileError(f"{self.attr}: {op.value} needs an ordered attribute; "
                               "strings support =, !=, prefix, in {...} and exists")
        if op is Op.EXISTS:
            return StringConstraint()
        for v in self.operands:
            if isinstance(v, Extreme):
                raise ProfileError(f"{self.attr}: {v.value} needs an ordered attribute")
            if not isinstance(v, str):
                raise DomainError(f"{self.attr}: {v!r} is not a string")
        values = [str(v) for v in self.operands]
        if op is Op.EQ:
            return StringConstraint.make(frozenset(values))
        if op is Op.IN:
            return StringConstraint.make(frozenset(values))
        if op is Op.NE:
            return StringConstraint.make(None, "", frozenset(values))
        assert op is Op.PREFIX
        return StringConstraint.make(None, values[0])

    def evaluate(self, domain: AnyDomain, key: object) -> bool:
        """Whether an event key satisfies this single condition."""
        return key in self.constraint(domain)
