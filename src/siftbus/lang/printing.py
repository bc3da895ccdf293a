"""Printing profiles in the profile language, so that the parser reads back an equal one.

Apart from :mod:`siftbus.lang.profile` (parsing) so that each reads in one sitting; the
parser's module re-exports these names.
"""

from __future__ import annotations

import json

from siftbus.model import Predicate, Profile
from siftbus.model.checks import Check
from siftbus.model.domain import AnyDomain
from siftbus.model.predicate import Extreme, Op, Operand
from siftbus.model.profile import check_predicates


def format_condition(pred: Predicate, domain: AnyDomain, *, compact: bool = False) -> str:
    """One condition in the profile language."""
    def lit(v: Operand) -> str:
        if isinstance(v, Extreme):
            return v.value
        return domain.literal(domain.key(v))

    sep = ", " if not compact else ","
    op = pred.op
    attr = pred.attr + (" not" if pred.negated else "")
    case = " ignorecase" if pred.nocase else ""
    if op is Op.EXISTS:
        return f"{attr} exists"
    if op is Op.PREFIX or op.value in STROPS:
        return f"{attr} {op.value} {json.dumps(pred.operands[0], ensure_ascii=False)}{case}"
    if op is Op.RANGE:
        return f"{attr} in [{lit(pred.operands[0])}{sep}{lit(pred.operands[1])}]"
    if op is Op.IN:
        return f"{attr} in {{{sep.join(lit(v) for v in pred.operands)}}}"
    if pred.nocase:
        return f"{pred.attr} {op.value} {lit(pred.operands[0])}{case}"
    if compact:
        return f"{pred.attr}{op.value}{lit(pred.operands[0])}"
    return f"{pred.attr} {op.value} {lit(pred.operands[0])}"


def format_profile(profile: Profile, *, form: str = "native", with_id: bool = True) -> str:
    """Print a profile so that :func:`parse_profile` reads back an equal profile."""
    etype = profile.etype
    preds = profile.predicates()
    head = ""
    if with_id:
        head = profile.id
        if profile.subscriber:
            head += f"@{profile.subscriber}"
        head += ": "
    if form == "bittner":
        if profile.extra is not None:
            raise ValueError("Bittner's form has no 'or' and no string tests: use 'native'")
        items = [format_condition(p, etype.attribute(p.attr).domain, compact=True)
                 for p in preds]
        items.append(f"TYPE={etype.name}")
        return f"{head}PROFILE(PRI({','.join(items)}))"
    if form != "native":
        raise ValueError(f"unknown profile form {form!r}: use 'native' or 'bittner'")
    items = [format_condition(p, etype.attribute(p.attr).domain) for p in preds]
    extra = profile.extra or ()

    def conj(checks: tuple[Check, ...]) -> list[str]:
        return [format_condition(p, etype.attribute(c.attr).domain)
                for c in checks for p in check_predicates(c, etype.attribute(c.attr).domain,
                                                          etype.attribute(c.attr).array)]

    if len(extra) == 1:
        items.extend(conj(extra[0]))
    elif extra:
        items.append(" or ".join(f"({', '.join(conj(c))})" for c in extra))
    return f"{head}{etype.name}({', '.join(items)})"


STROPS = frozenset({"suffix", "contains", "like", "matches", "cidr"})


__all__ = ["STROPS", "format_condition", "format_profile"]
