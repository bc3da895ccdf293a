"""``siftbus temporal``: persistent subspace notifications -- query them, and play the
collection-synchronisation application (a mobile client whose collection follows its
context) in process or on a broker network."""

from __future__ import annotations

import asyncio
import json
import math
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from siftbus.errors import InputError


class Sem(StrEnum):
    overlaps = "overlaps"
    covered_by = "covered-by"
    covers = "covers"


def _print(rec: dict[str, Any]) -> None:
    typer.echo(json.dumps(rec, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    tmp = typer.Typer(help="Persistent subspace notifications (temporal subspace matching, "
                      "Tarkoma ch. 6-9): queries and collection synchronisation.",
                      no_args_is_help=True)
    app.add_typer(tmp, name="temporal")

    @tmp.command("query")
    def query_cmd(
        notifications: Annotated[Path, typer.Argument(help="notifications (JSON lines)")],
        filter: Annotated[str, typer.Argument(help="a profile, e.g. 'Document(room = 12)'")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        semantics: Annotated[Sem, typer.Option(help="how the filter selects")] = Sem.overlaps,
        at: Annotated[float, typer.Option(help="the time (seconds; validity bounds in the "
                                          "file use the same clock)")] = 0.0,
        reverse: Annotated[bool, typer.Option(
            "--reverse", help="the other direction: which notifications of the file "
            "select FILTER taken as a notification subspace (each notification as a "
            "filter with --semantics)")] = False,
    ) -> None:
        """Print the ids of the notifications valid at --at that FILTER selects."""
        from siftbus.lang.profile import parse_profile
        from siftbus.model import load_schema
        from siftbus.temporal import DoubleForest, Semantics, TemporalFilter
        from siftbus.temporal.text import load_notifications

        if not math.isfinite(at):
            raise InputError(f"--at must be a finite number of seconds, got {at}",
                             field="at")
        sch = load_schema(schema)
        notes = load_notifications(notifications, sch, now=at)
        q = parse_profile(filter, sch, id="query", source="FILTER")
        sem = Semantics(semantics.value)
        df = DoubleForest(now=at)
        if reverse:
            df.load(filters=[TemporalFilter(n.subspace, sem) for n in notes
                             if n.active(at)])
            ids = df.filters_for(q)
        else:
            df.load(notes)
            ids = df.notifications_for(q, sem).ids()
        _print({"at": at, "semantics": sem.value, "reverse": reverse, "ids": ids})

    @tmp.command("sync")
    def sync_cmd(
        documents: Annotated[Path, typer.Argument(help="documents (notifications, JSON lines)")],
        scenario: Annotated[Path, typer.Argument(help="scenario (JSON lines: context, "
                                                 "publish, update, withdraw at times t)")],
        schema: Annotated[Path, typer.Option(help="schema TOML file")],
        semantics: Annotated[Sem, typer.Option(help="how the context selects")]
        = Sem.overlaps,
        broker: Annotated[str | None, typer.Option(
            help="play it on a running broker network instead (host:port of the "
                 "mobile client's broker)")] = None,
        publish_at: Annotated[str | None, typer.Option(
            "--publish-at", help="host:port of the publisher's broker (default: --broker)")]
        = None,
        speed: Annotated[float, typer.Option(help="on a network: scenario seconds per "
                                             "real second")] = 600.0,
    ) -> None:
        """Play SCENARIO on DOCUMENTS: a mobile client's collection follows its context.

        Prints one JSON line per move (what entered and left the collection) and per
        change (add, update, remove, and why). In process by default (virtual time); with
        --broker the documents are published and the client moves on real brokers, the
        scenario's clock running at --speed.
        """
        from siftbus.model import load_schema
        from siftbus.model.textio import read_text
        from siftbus.temporal.sync import parse_scenario, run
        from siftbus.temporal.text import load_notifications

        sch = load_schema(schema)
        docs = load_notifications(documents, sch, now=0.0)
        text = read_text(scenario)
        steps = parse_scenario(text, sch, source=str(scenario))
        from siftbus.temporal import Semantics

        sem = Semantics(semantics.value)
        if broker is None:
            for rec in run(docs, steps, semantics=sem, source=str(scenario)):
                _print(rec)
            return
        if not speed > 0:
            raise InputError("--speed must be positive", field="speed")
        asyncio.run(_on_network(docs, steps, sem, broker, publish_at or broker, speed))


async def _on_network(docs: list[Any], steps: list[Any], sem: Any, broker: str,
                      publish_at: str, speed: float) -> None:
    """The scenario on real brokers: a publisher client and a mobile client."""
    from siftbus.client import Client, parse_address
    from siftbus.lang.profile import format_profile
    from siftbus.temporal import PersistentNotification

    t0 = time.time()

    def real(t: float) -> float:
        return t0 + t / speed

    def scenario_time() -> float:
        return round((time.time() - t0) * speed, 1)

    async def publish(c: Client, n: PersistentNotification, op: str) -> None:
        v = n.validity
        start = real(max(v.start, 0.0)) if v.start != float("-inf") else None
        end = real(v.end) if v.end != float("inf") else None
        text = format_profile(n.subspace, with_id=False)
        if op == "publish":
            await c.retain(text, id=n.id, start=start, end=end)
        else:
            await c.update_retained(n.id, text, start=start, end=end)

    host, port = parse_address(publish_at)
    mhost, mport = parse_address(broker)
    async with await Client.connect(host, port, name=f"publisher-{int(t0)}") as pub, \
            await Client.connect(mhost, mport, name=f"mobile-{int(t0)}") as me:
        for n in docs:
            await publish(pub, n, "publish")
        sub = None
        gone: set[str] = set()
        for step in steps:
            delay = real(step.t) - time.time()
            if sub is not None:
                await _report(sub, delay, scenario_time)
            else:
                await asyncio.sleep(max(0.0, delay))
            if step.op == "context":
                before: set[str] = set()
                if sub is not None:
                    # The broker expires what is due before it handles the unsubscription,
                    # so changes still on their way arrive before its ACK: report them,
                    # then take the collection they leave (late timers on a busy machine).
                    await sub.unsubscribe()
                    await _report(sub, 0.0, scenario_time)
                    before = {_local(n.id) for n in sub.items()}
                sub = await me.subscribe_retained(step.value.with_id(f"ctx{step.line}"), sem)
                while not sub.queue.empty():
                    sub.queue.get_nowait()  # the initial collection, reported as a move
                after = {_local(n.id) for n in sub.items()}
                _print({"t": step.t, "context": format_profile(step.value, with_id=False),
                        "added": sorted(after - before), "removed": sorted(before - after),
                        "collection": sorted(after)})
            elif step.op == "withdraw":
                await pub.withdraw(step.value)
                gone.add(step.value)
            else:
                await publish(pub, step.value, step.op)
        if sub is not None:
            await _report(sub, 1.0, scenario_time)
        # what was published forever would outlive this run (retained): withdraw it
        forever = [n.id for n in docs if n.validity.end == float("inf") and n.id not in gone]
        if forever:
            await pub.withdraw(*forever)


def _local(gid: str) -> str:
    """A notification's id as its publisher named it (without ``broker/client/``)."""
    return gid.split("/", 2)[-1]


async def _report(sub: Any, wait: float, now: Any) -> None:
    """Print the changes arriving within ``wait`` seconds."""
    from siftbus.temporal import ChangeKind

    deadline = time.time() + max(0.0, wait)
    while True:
        left = deadline - time.time()
        if left <= 0 and sub.queue.empty():
            return
        try:
            ch = await sub.get(timeout=max(left, 0.001))
        except TimeoutError:
            return
        rec: dict[str, Any] = {"t": now(), "change": ch.kind.value,
                               "id": _local(ch.notification.id),
                               "reason": ch.reason.value}
        if ch.kind is not ChangeKind.REMOVE:  # as the in-process run prints it
            rec["version"] = ch.notification.version
        _print(rec)
