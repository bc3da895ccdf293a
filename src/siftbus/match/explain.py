"""Why an event does or does not match a profile, condition by condition.

What ``siftbus explain`` prints and the gateway's ``POST /api/explain`` answers: each
condition of the profile *as written* is evaluated against the event, and the
conjunction of those verdicts is checked against the profile's own matcher. The summary
names what held: with ``or``, the alternative and its conditions; on an array attribute,
the elements (from 0) that satisfy the condition, as ``tags[1]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from siftbus.lang.profile import (
    format_condition,
    format_profile,
    parse_profile_text,
    resolve,
    resolve_predicate,
)
from siftbus.model import Event, Schema
from siftbus.model.profile import predicate_check


@dataclass(frozen=True, slots=True)
class Verdict:
    """One row of an explanation: a written condition and whether the event meets it."""

    condition: str
    event_value: str
    holds: bool
    elements: tuple[int, ...] | None = None
    """On an array attribute: the positions (from 0) of the elements that satisfy the
    condition (a condition holds when one does); ``None`` elsewhere."""
    attribute: str = ""

    def held_by(self) -> str:
        """``tags[0], tags[2]``: the elements that satisfy the condition ("" if none)."""
        return ", ".join(f"{self.attribute}[{i}]" for i in self.elements or ())


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why an event does or does not match a profile."""

    profile: str
    type_ok: bool
    rows: tuple[Verdict, ...]
    matches: bool
    summary: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``siftbus explain --json``, the gateway's answer)."""
        return {"profile": self.profile, "matches": self.matches, "type_ok": self.type_ok,
                "conditions": [{"condition": r.condition, "event_value": r.event_value,
                                "holds": r.holds,
                                **({} if r.elements is None else
                                   {"elements": list(r.elements)})} for r in self.rows],
                "summary": self.summary}


def explain(schema: Schema, profile_text: str, event: Event) -> Explanation:
    """Evaluate each condition of ``profile_text`` as written against ``event``."""
    parsed = parse_profile_text(profile_text)
    profile = resolve(parsed, schema, id=parsed.id or "profile")
    etype = profile.etype
    if event.etype.name != etype.name:
        return Explanation(format_profile(profile), False, (), False,
                           f"NO MATCH: the profile is for {etype.name} events, "
                           f"the event is a {event.etype.name}")
    rows = []
    for wc in parsed.conditions:
        pred = resolve_predicate(wc.predicate, etype)
        attr = etype.attribute(pred.attr)
        key = event.keys[attr.position]
        check = predicate_check(pred, attr)
        elements = (tuple(i for i, k in enumerate(key) if check.holds(k))
                    if isinstance(key, tuple) and check.op != "absent" else None)
        rows.append(Verdict(format_condition(pred, attr.domain), _shown(attr.domain, key),
                            check.holds(key), elements, attr.name))
    failed = [r for r in rows if not r.holds]
    matches = profile.matches(event)
    if parsed.alternatives is not None:  # "or": say which alternative holds
        index = {id(wc): r for wc, r in zip(parsed.conditions, rows, strict=True)}
        held = [i for i, alt in enumerate(parsed.alternatives, start=1)
                if all(index[id(wc)].holds for wc in alt)]
        assert matches == bool(held)
        if held:
            which = [index[id(wc)] for wc in parsed.alternatives[held[0] - 1]]
            summary = (f"MATCH: alternative {held[0]} of {len(parsed.alternatives)} holds: "
                       + _named(which))
        else:
            summary = (f"NO MATCH: none of {len(parsed.alternatives)} alternatives holds")
        return Explanation(format_profile(profile), True, tuple(rows), matches, summary)
    assert matches == (not failed)  # the conjunction of written conditions is the profile
    if matches:
        summary = (f"MATCH: the event meets all {len(rows)} condition(s)"
                   + ("" if not any(r.elements for r in rows) else ": " + _named(rows))
                   if rows else
                   "MATCH: the profile has no condition, every event of its type matches")
    else:
        summary = f"NO MATCH: {len(failed)} of {len(rows)} condition(s) fail: " + \
            "; ".join(r.condition for r in failed)
    return Explanation(format_profile(profile), True, tuple(rows), matches, summary)


def _named(rows: list[Verdict]) -> str:
    """The conditions that held, each with the array elements that satisfy it."""
    return "; ".join(r.condition + (f" (by {r.held_by()})" if r.elements else "")
                     for r in rows)


def _shown(domain: Any, key: object) -> str:
    """The event's value as a literal: ``(absent)``, or ``[...]`` for an array."""
    if key is None:
        return "(absent)"
    if isinstance(key, tuple):
        return "[" + ", ".join(domain.literal(k) for k in key) + "]"
    return str(domain.literal(key))


__all__ = ["Explanation", "Verdict", "explain"]
