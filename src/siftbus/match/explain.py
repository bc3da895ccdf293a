"""Why an event does or does not match a profile, condition by condition.

What ``siftbus explain`` prints and the gateway's ``POST /api/explain`` answers: each
condition of the profile *as written* is evaluated against the event, and the
conjunction of those verdicts is checked against the profile's own matcher.
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
                                "holds": r.holds} for r in self.rows],
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
        rows.append(Verdict(format_condition(pred, attr.domain), _shown(attr.domain, key),
                            predicate_check(pred, attr).holds(key)))
    failed = [r for r in rows if not r.holds]
    matches = profile.matches(event)
    if parsed.alternatives is not None:  # "or": say which alternative holds
        index = {id(wc): r for wc, r in zip(parsed.conditions, rows, strict=True)}
        held = [i for i, alt in enumerate(parsed.alternatives, start=1)
                if all(index[id(wc)].holds for wc in alt)]
        assert matches == bool(held)
        summary = (f"MATCH: alternative {held[0]} of {len(parsed.alternatives)} holds"
                   if held else f"NO MATCH: none of {len(parsed.alternatives)} alternatives "
                   "holds")
        return Explanation(format_profile(profile), True, tuple(rows), matches, summary)
    assert matches == (not failed)  # the conjunction of written conditions is the profile
    if matches:
        summary = (f"MATCH: the event meets all {len(rows)} condition(s)" if rows
                   else "MATCH: the profile has no condition, every event of its type matches")
    else:
        summary = f"NO MATCH: {len(failed)} of {len(rows)} condition(s) fail: " + \
            "; ".join(r.condition for r in failed)
    return Explanation(format_profile(profile), True, tuple(rows), matches, summary)


def _shown(domain: Any, key: object) -> str:
    """The event's value as a literal: ``(absent)``, or ``[...]`` for an array."""
    if key is None:
        return "(absent)"
    if isinstance(key, tuple):
        return "[" + ", ".join(domain.literal(k) for k in key) + "]"
    return str(domain.literal(key))


__all__ = ["Explanation", "Verdict", "explain"]
