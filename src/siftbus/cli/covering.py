"""``siftbus covering``: relations between two profiles, covering queries, poset/forest
dumps, and what the forwarding algorithm sends each neighbour."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from siftbus.errors import SiftbusError

if TYPE_CHECKING:
    from siftbus.model import Profile, Schema


class Structure(StrEnum):
    poset = "poset"
    forest = "forest"


class Format(StrEnum):
    json = "json"
    dot = "dot"


class Strategy(StrEnum):
    simple = "simple"
    identity = "identity"
    covering = "covering"
    merging = "merging"


def _profile(text: str, schema: Schema, default_id: str, what: str) -> Profile:
    """A profile from the command line; the id may be left out."""
    from siftbus.lang.profile import parse_profile, parse_profile_text

    try:
        has_id = parse_profile_text(text, source=what).id is not None
        return parse_profile(text, schema, id=None if has_id else default_id, source=what)
    except SiftbusError as exc:
        raise exc.located(source=what) from None


def register(app: typer.Typer) -> None:
    cov = typer.Typer(help="Covering, overlap and merging of profiles; filters poset and "
                      "poset-derived forest; forwarding to neighbours.",
                      no_args_is_help=True)
    app.add_typer(cov, name="covering")

    @cov.command("relation")
    def relation_cmd(
        p: Annotated[str, typer.Argument(help="first profile, e.g. 'T(a > 3)'")],
        q: Annotated[str, typer.Argument(help="second profile")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        imperfect: Annotated[bool, typer.Option(
            help="also print the imperfect merge (per-attribute hull) when no perfect "
                 "merge exists")] = False,
    ) -> None:
        """Print how P relates to Q, and their perfect merge if there is one.

        The relation is one of covers, covered-by, equivalent, overlaps, disjoint.
        """
        from siftbus.covering.relations import merge, relation
        from siftbus.lang.profile import format_profile
        from siftbus.model import load_schema

        sch = load_schema(schema)
        pp, qq = _profile(p, sch, "P", "P"), _profile(q, sch, "Q", "Q")
        print(relation(pp, qq).value)
        m = merge(pp, qq, id="merged")
        if m is not None:
            print(f"perfect merge: {format_profile(m, with_id=False)}")
        else:
            print("no perfect merge")
            loose = merge(pp, qq, imperfect=True, id="merged") if imperfect else None
            if loose is not None:
                print(f"imperfect merge: {format_profile(loose, with_id=False)}")

    @cov.command("show")
    def show_cmd(
        profiles: Annotated[Path, typer.Argument(help="profile file")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        format: Annotated[Format, typer.Option("--format", help="output format")]
        = Format.json,
        structure: Annotated[Structure, typer.Option(help="routing table structure")]
        = Structure.poset,
        output: Annotated[Path | None, typer.Option(
            "--output", "-o", help="write here instead of stdout")] = None,
    ) -> None:
        """Dump the filters poset or poset-derived forest of PROFILES as JSON or DOT.

        Interfaces are the profiles' subscribers (or ids).
        """
        from siftbus.covering.export import table_to_dot, table_to_json
        from siftbus.covering.forest import PosetForest
        from siftbus.covering.poset import FilterPoset
        from siftbus.lang.profile import load_profiles
        from siftbus.model import load_schema

        sch = load_schema(schema)
        table = FilterPoset() if structure is Structure.poset else PosetForest()
        for prof in load_profiles(profiles, sch):
            table.add(prof)
        text = (json.dumps(table_to_json(table), indent=1, ensure_ascii=False) + "\n"
                if format is Format.json else table_to_dot(table))
        if output is None:
            typer.echo(text, nl=False)
        else:
            try:
                output.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise SiftbusError(f"cannot write {output}: {exc.strerror}") from None

    @cov.command("query")
    def query_cmd(
        profiles: Annotated[Path, typer.Argument(help="profile file")],
        p: Annotated[str, typer.Argument(help="the profile to ask about")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
    ) -> None:
        """Print (JSON) which profiles cover P, are covered by it, or are equivalent."""
        from siftbus.covering.query import CoveringIndex
        from siftbus.lang.profile import load_profiles
        from siftbus.model import load_schema

        sch = load_schema(schema)
        index = CoveringIndex(load_profiles(profiles, sch))
        pp = _profile(p, sch, "P", "P")
        result = {
            "covering": [x.id for x in index.covering(pp)],
            "directly_covering": [x.id for x in index.directly_covering(pp)],
            "covered": [x.id for x in index.covered(pp)],
            "directly_covered": [x.id for x in index.directly_covered(pp)],
            "equivalent": [x.id for x in index.equivalent(pp)],
        }
        typer.echo(json.dumps(result))

    @cov.command("forward")
    def forward_cmd(
        profiles: Annotated[Path, typer.Argument(help="profile file")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        neighbour: Annotated[list[str], typer.Option(
            "--neighbour", "-n", help="a neighbour broker (repeat the option)")],
        strategy: Annotated[Strategy, typer.Option(help="forwarding strategy")]
        = Strategy.covering,
        imperfect: Annotated[bool, typer.Option(
            help="merging: merge into per-attribute hulls (false positives)")] = False,
        structure: Annotated[Structure, typer.Option(
            help="covering structure of covering and merging")] = Structure.poset,
    ) -> None:
        """Print (JSON) what each neighbour must hold from a broker holding PROFILES.

        This is the broker's own forwarding table. A profile comes from its subscriber
        (``id@B: ...`` comes from neighbour B, so it is never sent back to B), else from
        a local client named like its id.
        """
        from siftbus.covering.forest import PosetForest
        from siftbus.covering.forwarding import ForwardingTable
        from siftbus.covering.poset import FilterPoset
        from siftbus.lang.profile import format_profile, load_profiles
        from siftbus.model import load_schema

        sch = load_schema(schema)
        loaded = load_profiles(profiles, sch)
        table = ForwardingTable(
            dict.fromkeys(neighbour), strategy=strategy.value, imperfect=imperfect,
            structure=FilterPoset() if structure is Structure.poset else PosetForest(),
            name="merged")
        for prof in loaded:
            table.subscribe(prof)
        result = {
            "strategy": strategy.value,
            "profiles": len(loaded),
            "neighbours": {y: {
                "count": len(sent := table.exported(y)),
                "without_covering": sum(1 for q in loaded if q.owner != y),
                "profiles": [format_profile(q) for q in sent],
            } for y in table.neighbours},
        }
        typer.echo(json.dumps(result, indent=1, ensure_ascii=False))
