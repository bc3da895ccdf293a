"""The keyed layout of parsed events: its Arrow schema and Spark DDL, where each
attribute of a type lives in it (:class:`TypeLayout`), and the builder of the parse
stage's output batches (:class:`ParsedRows`).

Separate from :mod:`~siftbus.spark.parse` because the layout is shared: every parser
there (JSON lines, wide tables, XML, already-keyed rows) writes it, and the match stage
reads it back into events; the parsers themselves are the business of ``parse``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa

from siftbus.errors import SiftbusError
from siftbus.model import Event, EventType, Schema, StringDomain, parse_schema

PARSED_SCHEMA = pa.schema([
    ("source", pa.string()),
    ("event", pa.int64()),
    ("type", pa.string()),
    ("ikeys", pa.list_(pa.int64())),
    ("skeys", pa.list_(pa.string())),
    ("text", pa.string()),
    ("error", pa.string()),
    ("line", pa.int64()),
    ("column", pa.int32()),
])
"""Arrow schema of the parse stage's output (good rows have a null ``error``; ``line`` is
the line of a JSON-lines file, else ``event + 1``)."""

PARSED_DDL = (
    "source string, event long, type string, ikeys array<long>, skeys array<string>, "
    "text string, error string, line long, column int"
)
"""The same schema as a Spark DDL string (for ``mapInArrow``)."""

KEYED_DDL = "source string, event long, type string, ikeys array<long>, skeys array<string>"
"""The keyed columns without text and error, as produced by the workload generators."""


@dataclass(frozen=True, slots=True)
class TypeLayout:
    """Where each attribute of a type lives in the keyed layout."""

    name: str
    ordered: tuple[str, ...]
    """Ordered attributes, in schema order: ``ikeys[i]`` is ``ordered[i]``."""
    strings: tuple[str, ...]
    """String attributes, in schema order: ``skeys[j]`` is ``strings[j]``."""
    slots: tuple[tuple[bool, int], ...]
    """Per schema position: (is_string, index into ikeys or skeys)."""
    bounds: tuple[tuple[int, int], ...]
    """Per ordered attribute: the domain's (min_key, max_key)."""
    extended: bool = False
    """An extended type (optional, nested, array or open-kind attributes, issue 31): its
    keys (absent values, arrays, integers beyond int64) travel as one JSON text in
    ``skeys`` and are matched event by event."""

    @classmethod
    def of(cls, etype: EventType) -> TypeLayout:
        if etype.extended:
            return cls(etype.name, (), ("@keys",), (), (), True)
        ordered: list[str] = []
        strings: list[str] = []
        slots: list[tuple[bool, int]] = []
        bounds: list[tuple[int, int]] = []
        for attr in etype.attributes:
            dom = attr.domain
            if isinstance(dom, StringDomain):
                slots.append((True, len(strings)))
                strings.append(attr.name)
            else:
                slots.append((False, len(ordered)))
                ordered.append(attr.name)
                bounds.append((dom.min_key, dom.max_key))
        return cls(etype.name, tuple(ordered), tuple(strings), tuple(slots), tuple(bounds))

    def split(self, keys: Sequence[Any]) -> tuple[list[int], list[str]]:
        """An event's keys (schema order) as (ikeys, skeys)."""
        if self.extended:
            return [], [json.dumps([list(k) if isinstance(k, tuple) else k for k in keys])]
        ik: list[int] = []
        sk: list[str] = []
        for (is_str, _), k in zip(self.slots, keys, strict=True):
            (sk if is_str else ik).append(k)
        return ik, sk

    def join(self, ikeys: Sequence[int], skeys: Sequence[str]) -> tuple[Any, ...]:
        """(ikeys, skeys) back to keys in schema order."""
        if self.extended:
            return tuple(tuple(k) if isinstance(k, list) else k for k in json.loads(skeys[0]))
        return tuple(skeys[i] if is_str else int(ikeys[i]) for is_str, i in self.slots)


@lru_cache(maxsize=8)
def schema_from_text(text: str) -> Schema:
    """Parse a schema once per process (executors receive the TOML text, not objects)."""
    return parse_schema(text)


@lru_cache(maxsize=8)
def layouts_for(text: str) -> dict[str, TypeLayout]:
    """Every type's layout, cached per schema text."""
    return {t.name: TypeLayout.of(t) for t in schema_from_text(text)}


def event_to_keyed(event: Event, layouts: dict[str, TypeLayout]) -> tuple[list[int], list[str]]:
    """An event's keys split into (ikeys, skeys)."""
    return layouts[event.etype.name].split(event.keys)


def keyed_to_event(schema: Schema, layouts: dict[str, TypeLayout], type_name: str,
                   ikeys: Sequence[int], skeys: Sequence[str]) -> Event:
    """Rebuild an :class:`Event` from keyed columns (no validation: keys come checked)."""
    return Event(schema[type_name], layouts[type_name].join(ikeys, skeys))


class ParsedRows:
    """Column builders for one output batch of the parse stage (good and bad rows)."""

    def __init__(self) -> None:
        self.source: list[str | None] = []
        self.event: list[int] = []
        self.type: list[str | None] = []
        self.ikeys: list[list[int] | None] = []
        self.skeys: list[list[str] | None] = []
        self.text: list[str | None] = []
        self.error: list[str | None] = []
        self.line: list[int] = []
        self.column: list[int | None] = []

    def good(self, source: str | None, event: int, ev: Event, layouts: dict[str, TypeLayout],
             text: str | None, line: int | None = None) -> None:
        ik, sk = layouts[ev.etype.name].split(ev.keys)
        self.line.append(event + 1 if line is None else line)
        self.source.append(source)
        self.event.append(event)
        self.type.append(ev.etype.name)
        self.ikeys.append(ik)
        self.skeys.append(sk)
        self.text.append(text)
        self.error.append(None)
        self.column.append(None)

    def bad(self, source: str | None, event: int, type_name: str | None, text: str | None,
            exc: SiftbusError, line: int | None = None) -> None:
        self.line.append(event + 1 if line is None else line)
        self.source.append(source)
        self.event.append(event)
        self.type.append(type_name)
        self.ikeys.append(None)
        self.skeys.append(None)
        self.text.append(text)
        self.error.append(exc.message)
        self.column.append(exc.column)

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([
            pa.array(self.source, pa.string()),
            pa.array(self.event, pa.int64()),
            pa.array(self.type, pa.string()),
            pa.array(self.ikeys, pa.list_(pa.int64())),
            pa.array(self.skeys, pa.list_(pa.string())),
            pa.array(self.text, pa.string()),
            pa.array(self.error, pa.string()),
            pa.array(self.line, pa.int64()),
            pa.array(self.column, pa.int32()),
        ], schema=PARSED_SCHEMA)


__all__ = [
    "KEYED_DDL",
    "PARSED_DDL",
    "PARSED_SCHEMA",
    "ParsedRows",
    "TypeLayout",
    "event_to_keyed",
    "keyed_to_event",
    "layouts_for",
    "schema_from_text",
]
