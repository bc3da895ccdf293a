"""Collection synchronisation by context (Tarkoma 2006, ch. 9), on the DoubleForest.

A mobile client keeps a *collection*: the items (persistent notifications: documents,
menus, plans, alarms) selected by its *context* -- a filter such as "documents about the
room I am in", ``Document(room = 12)`` -- among those valid now. When the client moves,
its context filter is replaced and the collection changes by the difference; when a
document is published, updated, withdrawn, or its validity starts or ends, the
collection changes by exactly that item.

A *scenario* (JSON lines, times in seconds, non-decreasing) drives it::

    {"t": 0, "context": "Document(room = 12)"}
    {"t": 600, "publish": {"id": "memo-9", "subspace": "Document(room in [10, 14])", "ttl": 900}}
    {"t": 700, "update": {"id": "memo-9", "subspace": "Document(room = 12)", "ttl": 300}}
    {"t": 900, "withdraw": "menu-1"}

``publish`` and ``update`` take a notification object (:mod:`siftbus.temporal.text`;
``start`` defaults to the step's time). :func:`run` yields one JSON-ready record per
step and per change of the collection.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from siftbus.errors import InputError, SiftbusError
from siftbus.lang.profile import format_profile, parse_profile
from siftbus.model import Profile, Schema
from siftbus.model.textio import split_lines

from .collection import Collection
from .double import DoubleForest
from .notification import Change, ChangeKind, PersistentNotification, Semantics, TemporalFilter
from .text import field_column, notification_from_json, parse_object_line

_OPS = ("context", "publish", "update", "withdraw")


@dataclass(frozen=True, slots=True)
class Step:
    """One line of a scenario."""

    t: float
    op: str
    """``context``, ``publish``, ``update`` or ``withdraw``."""
    value: Profile | PersistentNotification | str
    line: int
    column: int = 1
    """Where the step's value stands in its line (errors of the step point there)."""


def parse_scenario(text: str, schema: Schema, *, source: str | None = None) -> list[Step]:
    """The steps of a scenario; errors name the line and the column."""
    steps: list[Step] = []
    last = -math.inf
    for i, raw in split_lines(text):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            step = _step_line(raw, schema, last, source, i)
        except SiftbusError as exc:
            if exc.column is None:
                exc.column = field_column(raw, exc.field) or 1
            raise exc.located(source=source, line=i) from None
        last = step.t
        steps.append(step)
    return steps


def _step_line(raw: str, schema: Schema, last: float, source: str | None, i: int) -> Step:
    obj = parse_object_line(raw, "a step", source=source, line=i)
    t = obj.get("t")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise InputError("'t' must be a number of seconds", field="t")
    if t < last:
        raise InputError(f"time goes back from {last} to {t}", field="t")
    ops = [k for k in obj if k != "t"]
    if len(ops) != 1 or ops[0] not in _OPS:
        bad = next((k for k in ops if k not in _OPS), ops[1] if len(ops) > 1 else None)
        raise InputError(f"a step has 't' and one of {', '.join(_OPS)}",
                         column=field_column(raw, bad, key=True) if bad else None)
    op = ops[0]
    arg = obj[op]
    at = field_column(raw, op) or 1
    value: Profile | PersistentNotification | str
    if op == "context":
        if not isinstance(arg, str):
            raise InputError("'context' must be a profile text", field="context")
        try:
            value = parse_profile(arg, schema, id="context", source=source, line=i)
        except SiftbusError as exc:
            if exc.column is not None:
                exc.column += at  # from the profile text to the line (after its quote)
            raise
    elif op == "withdraw":
        if not isinstance(arg, str):
            raise InputError("'withdraw' names a notification id", field="withdraw")
        value = arg
    else:
        if not isinstance(arg, dict):
            raise InputError(f"'{op}' must be a notification object", field=op)
        try:
            value = notification_from_json(arg, schema, now=float(t), source=source,
                                           line=i, text=raw)
        except SiftbusError as exc:
            raise exc.located(column=at) from None  # a field it lacks: the object
    return Step(float(t), op, value, i, at)


class MobileClient:
    """One client's context filter and collection, kept in step with a DoubleForest."""

    def __init__(self, df: DoubleForest, semantics: Semantics = Semantics.OVERLAPS,
                 name: str = "me") -> None:
        self.df = df
        self.semantics = semantics
        self.name = name
        self.context: Profile | None = None
        self.collection = Collection(name)
        self._n = 0

    @property
    def filter_id(self) -> str:
        return f"{self.name}#{self._n}"

    def move(self, context: Profile) -> tuple[list[str], list[str]]:
        """Take a new context; returns the ids that entered and left the collection."""
        if self.context is not None:
            self.df.unsubscribe(self.filter_id)
        self._n += 1
        self.context = context
        before = set(self.collection.items)
        fresh = Collection(self.name)
        for ch in self.df.subscribe(TemporalFilter(context.with_id(self.filter_id),
                                                   self.semantics)):
            fresh.apply(Change(ch.kind, self.name, ch.notification, ch.reason))
        self.collection = fresh
        after = set(fresh.items)
        return sorted(after - before), sorted(before - after)

    def apply(self, changes: Iterable[Change]) -> list[Change]:
        """Apply the changes meant for this client; returns them."""
        mine = [ch for ch in changes if ch.filter == self.filter_id]
        for ch in mine:
            self.collection.apply(Change(ch.kind, self.name, ch.notification, ch.reason))
        return mine


def run(documents: Iterable[PersistentNotification], steps: Iterable[Step], *,
        semantics: Semantics = Semantics.OVERLAPS,
        source: str | None = None) -> Iterator[dict[str, Any]]:
    """Play a scenario; yields a record per move and per change of the collection.
    Documents are published at time 0 (those already expired are skipped)."""
    df = DoubleForest(now=0.0)
    for n in documents:
        if not n.validity.expired(0.0):
            df.publish(n)
    me = MobileClient(df, semantics)
    for step in steps:
        try:
            yield from _step(df, me, step)
        except SiftbusError as exc:
            raise exc.located(source=source, line=step.line, column=step.column) from None


def _step(df: DoubleForest, me: MobileClient, step: Step) -> Iterator[dict[str, Any]]:
    for ch in me.apply(df.advance(step.t)):
        v = ch.notification.validity
        yield _change(v.end if ch.reason.value == "expired" else v.start, ch)
    if step.op == "context":
        assert isinstance(step.value, Profile)
        added, removed = me.move(step.value)
        yield {"t": step.t, "context": format_profile(step.value, with_id=False),
               "added": added, "removed": removed, "collection": me.collection.ids()}
        return
    if step.op == "withdraw":
        assert isinstance(step.value, str)
        changes = df.withdraw(step.value)
    else:
        assert isinstance(step.value, PersistentNotification)
        changes = getattr(df, step.op)(step.value)
    for ch in me.apply(changes):
        yield _change(step.t, ch)


def _change(t: float, ch: Change) -> dict[str, Any]:
    rec: dict[str, Any] = {"t": t, "change": ch.kind.value, "id": ch.notification.id,
                           "reason": ch.reason.value}
    if ch.kind is not ChangeKind.REMOVE:
        rec["version"] = ch.notification.version
    return rec


__all__ = ["MobileClient", "Step", "parse_scenario", "run"]
