"""``siftbus explain``: why an event does or does not match a profile, condition by condition."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from siftbus.cli._common import stdout
from siftbus.errors import SiftbusError
from siftbus.lang.profile import (
    format_condition,
    format_profile,
    parse_profile_text,
    resolve,
    resolve_predicate,
)
from siftbus.model import Event, Schema, load_schema, parse_event


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
        rows.append(Verdict(format_condition(pred, attr.domain),
                            attr.domain.literal(key), pred.evaluate(attr.domain, key)))
    failed = [r for r in rows if not r.holds]
    matches = profile.matches(event)
    assert matches == (not failed)  # the conjunction of written conditions is the profile
    if matches:
        summary = (f"MATCH: the event meets all {len(rows)} condition(s)" if rows
                   else "MATCH: the profile has no condition, every event of its type matches")
    else:
        summary = f"NO MATCH: {len(failed)} of {len(rows)} condition(s) fail: " + \
            "; ".join(r.condition for r in failed)
    return Explanation(format_profile(profile), True, tuple(rows), matches, summary)


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain_cmd(
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        profile: Annotated[str, typer.Option(help="a profile, e.g. 'Temperature(value > 20)'")],
        event: Annotated[str, typer.Option(help="an event as JSON")],
        as_json: Annotated[bool, typer.Option("--json", help="print the explanation as JSON")]
        = False,
    ) -> None:
        """Show condition by condition why EVENT does or does not match PROFILE
        (exit 0 on a match, 1 otherwise)."""
        sch = load_schema(schema)
        try:
            ev = parse_event(event, sch, source="--event", lineno=1)
        except SiftbusError as exc:
            raise exc.located(source="--event") from None
        try:
            result = explain(sch, profile, ev)
        except SiftbusError as exc:
            raise exc.located(source="--profile") from None
        if as_json:
            print(json.dumps({
                "profile": result.profile, "matches": result.matches, "type_ok": result.type_ok,
                "conditions": [{"condition": r.condition, "event_value": r.event_value,
                                "holds": r.holds} for r in result.rows],
                "summary": result.summary}))
        else:
            stdout.print(f"profile  {escape(result.profile)}")
            stdout.print(f"event    {escape(ev.to_json())}")
            if result.rows:
                table = Table("condition", "event value", "holds")
                for r in result.rows:
                    table.add_row(escape(r.condition), escape(r.event_value),
                                  "[green]yes[/green]" if r.holds else "[red]no[/red]")
                stdout.print(table)
            stdout.print(result.summary)
        raise typer.Exit(0 if result.matches else 1)
