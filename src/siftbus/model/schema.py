"""Event types and the schema registry, loaded from a TOML file.

A schema file has one table per event type and one key per attribute, in the order
attributes are declared::

    [Temperature]
    sensor = "int[1,400]"
    value = "decimal[-40,60,1]"

A type may declare one of its int or decimal attributes as its *event time* (seconds)
with the key ``"@time" = "attribute"``; composite profiles order events by it (see
docs/composite.md). Events of other types take their publication's time stamp.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from siftbus.errors import SchemaError, SiftbusError, excerpt
from siftbus.model.domain import AnyDomain, ClassicDomain, is_identifier, parse_domain
from siftbus.model.textio import TEXT_LIMITS, TextLimits, parse_toml, read_text


@dataclass(frozen=True, slots=True)
class Attribute:
    """One attribute of an event type: its name (a dotted path for a nested field), domain
    and position; ``optional`` ones may be absent, ``array`` ones hold a list of values."""

    name: str
    domain: AnyDomain
    position: int
    optional: bool = False
    array: bool = False

    @property
    def spec(self) -> str:
        """The schema-file spelling: ``optional array<string>``, ``float``, ..."""
        inner = f"array<{self.domain.spec}>" if self.array else self.domain.spec
        return f"optional {inner}" if self.optional else inner

    @property
    def classic(self) -> bool:
        """Whether every engine's compiled path handles it (required, flat, finite kind)."""
        return (not self.optional and not self.array and "." not in self.name
                and isinstance(self.domain, ClassicDomain))


MAX_PATH_DEPTH = 8
"""Most segments in an attribute path (``a.b.c`` has 3): deeper nesting is refused."""


def parse_attribute_spec(spec: str) -> tuple[AnyDomain, bool, bool]:
    """``[optional ]KIND`` or ``[optional ]array<KIND>``: (domain, optional, array)."""
    text = spec.strip()
    optional = text.startswith("optional ")
    if optional:
        text = text[len("optional "):].strip()
    array = text.startswith("array<") and text.endswith(">")
    if array:
        text = text[len("array<"):-1]
    return parse_domain(text), optional, array


def check_path(path: str) -> None:
    """Refuse an attribute path that is not dotted identifiers or is too deep."""
    parts = path.split(".")
    if len(parts) > MAX_PATH_DEPTH:
        raise SchemaError(f"attribute path {excerpt(repr(path))} is {len(parts)} deep; at most "
                          f"{MAX_PATH_DEPTH} (schema.MAX_PATH_DEPTH)")
    if not all(is_identifier(p) for p in parts):
        raise SchemaError(f"attribute name {excerpt(repr(path))} is not a plain identifier "
                          "(or a dotted path of them)")


@dataclass(frozen=True, slots=True)
class EventType:
    """A named set of attributes, each with a finite domain (or string)."""

    name: str
    attributes: tuple[Attribute, ...]
    time: str | None = None
    """The attribute that holds the event time in seconds (``"@time"``), if declared."""
    _by_name: Mapping[str, Attribute] = field(init=False, repr=False, compare=False, hash=False)
    extended: bool = field(init=False, repr=False, compare=False, hash=False, default=False)
    """Whether an attribute is optional, nested, an array or of an open kind: the engines
    then match this type by the reference semantics (``match.residual``)."""

    def __post_init__(self) -> None:
        if not is_identifier(self.name):
            raise SchemaError(f"event type name {self.name!r} is not a plain identifier")
        by_name: dict[str, Attribute] = {}
        for i, attr in enumerate(self.attributes):
            if attr.position != i:
                raise SchemaError(f"attribute {attr.name!r} has position {attr.position}, not {i}")
            if attr.name in by_name:
                raise SchemaError(f"attribute {attr.name!r} of {self.name} is declared twice")
            by_name[attr.name] = attr
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "extended", not all(a.classic for a in self.attributes))
        if self.time is not None:
            _check_time_attribute(self.name, by_name.get(self.time), self.time)

    @classmethod
    def of(cls, name: str, **specs: str | AnyDomain) -> EventType:
        """Build a type from keyword specs: ``EventType.of("T", a="int[0,9]")``."""
        attrs = []
        for i, (attr, spec) in enumerate(specs.items()):
            attr = attr.replace("__", ".")  # of(a__b="int") declares the path a.b
            check_path(attr)
            if isinstance(spec, str):
                domain, optional, array = parse_attribute_spec(spec)
            else:
                domain, optional, array = spec, False, False
            attrs.append(Attribute(attr, domain, i, optional, array))
        return cls(name, tuple(attrs))

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name``; raises ``KeyError`` if there is none."""
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)


@dataclass(frozen=True, slots=True)
class Schema:
    """The registry of event types, by name, in declaration order."""

    types: tuple[EventType, ...]
    _by_name: Mapping[str, EventType] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        by_name: dict[str, EventType] = {}
        for t in self.types:
            if t.name in by_name:
                raise SchemaError(f"event type {t.name!r} is declared twice")
            by_name[t.name] = t
        object.__setattr__(self, "_by_name", by_name)

    def __getitem__(self, name: str) -> EventType:
        return self._by_name[name]

    def get(self, name: str) -> EventType | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[EventType]:
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.types)

    @property
    def extended(self) -> bool:
        """Whether a type has optional, nested, array or open-kind attributes (then the
        compiled scanners step aside: they read finite kinds only)."""
        return any(t.extended for t in self.types)

    def to_toml(self) -> str:
        """The schema written back as a TOML file that :func:`load_schema` reads."""
        out: list[str] = []
        for t in self.types:
            out.append(f"[{t.name}]")
            out.extend(f'{_toml_key(a.name)} = "{a.spec}"' for a in t.attributes)
            if t.time is not None:
                out.append(f'"{TIME_KEY}" = "{t.time}"')
            out.append("")
        return "\n".join(out)

    def to_dict(self) -> dict[str, dict[str, str]]:
        """``{type: {attribute: spec}}``, the shape of the TOML file (for the wire)."""
        out: dict[str, dict[str, str]] = {}
        for t in self.types:
            out[t.name] = {a.name: a.spec for a in t.attributes}
            if t.time is not None:
                out[t.name][TIME_KEY] = t.time
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, source: str | None = None,
                  text: str | None = None) -> Schema:
        """Build a schema from ``{type: {attribute: spec}}``; errors name the key.

        The line of an error is looked up only when there is an error (``tomllib`` keeps no
        positions): looking it up for every key made a schema of 10,000 types quadratic.
        """
        types = []
        times: dict[str, object] = {}  # "@time" per type, applied once the types exist
        for tname, table in data.items():
            if not isinstance(table, Mapping):
                raise SchemaError(
                    f"{excerpt(repr(tname))} must be a table of attributes", source=source,
                    line=_find_line(text, tname, None),
                )
            if not is_identifier(tname):
                raise SchemaError(f"event type name {excerpt(repr(tname))} is not a plain "
                                  "identifier", source=source, line=_find_line(text, tname, None))
            attrs = []
            if TIME_KEY in table:
                times[tname] = table[TIME_KEY]
                table = {k: v for k, v in table.items() if k != TIME_KEY}
            for i, (aname, spec) in enumerate(_flatten(table, tname, source, text)):
                if not all(is_identifier(p) for p in aname.split(".")):
                    raise SchemaError(
                        f"attribute name {excerpt(repr(aname))} of {tname} is not a plain "
                        "identifier", source=source, line=_find_line(text, tname, aname),
                        column=1)
                if not isinstance(spec, str):
                    raise SchemaError(
                        f"{tname}.{aname}: type must be a string such as \"int[0,9]\"",
                        source=source, line=_find_line(text, tname, aname), column=1)
                try:
                    check_path(aname)
                    domain, optional, array = parse_attribute_spec(spec)
                    attrs.append(Attribute(aname, domain, i, optional, array))
                except SiftbusError as exc:
                    raise SchemaError(f"{tname}.{aname}: {exc.message}", source=source,
                                      line=_find_line(text, tname, aname), column=1) from None
            try:
                types.append(EventType(tname, tuple(attrs)))
            except SiftbusError as exc:
                raise exc.located(source=source, line=_find_line(text, tname, None)) from None
        if not types:
            raise SchemaError("the schema declares no event type", source=source)
        if times:
            types = [_with_time(t, times[t.name], source, text) if t.name in times else t
                     for t in types]
        return cls(tuple(types))


def _toml_key(name: str) -> str:
    return f'"{name}"' if "." in name else name


def _flatten(table: Mapping[str, object], tname: str, source: str | None,
             text: str | None) -> list[tuple[str, object]]:
    """The attributes of a type table, nested tables as dotted paths, in written order."""
    out: list[tuple[str, object]] = []

    def walk(t: Mapping[str, object], prefix: str, depth: int) -> None:
        for k, v in t.items():
            path = f"{prefix}{k}"
            if isinstance(v, Mapping):
                if depth + 1 >= MAX_PATH_DEPTH:
                    raise SchemaError(f"{tname}.{excerpt(path)}: nested deeper than "
                                      f"{MAX_PATH_DEPTH} (schema.MAX_PATH_DEPTH)",
                                      source=source, line=_find_line(text, tname, None))
                walk(v, path + ".", depth + 1)
            else:
                out.append((path, v))

    walk(table, "", 0)
    return out


TIME_KEY = "@time"
"""The key of a type's table that names its event-time attribute."""

MAX_TIME_PLACES = 6
"""Event times are whole microseconds, so a decimal time has at most 6 places."""


def _check_time_attribute(tname: str, attr: Attribute | None, name: str) -> None:
    if attr is None:
        raise SchemaError(f"{tname}: {TIME_KEY} names {excerpt(repr(name))}, which is not an "
                          f"attribute of {tname}", field=TIME_KEY)
    d = attr.domain
    if d.spec.split("[", 1)[0] not in ("int", "decimal"):
        raise SchemaError(f"{tname}: the time attribute {name!r} must be int or decimal "
                          f"(seconds), not {d.spec}", field=TIME_KEY)
    places = getattr(d, "places", 0)
    if places > MAX_TIME_PLACES:
        raise SchemaError(f"{tname}: the time attribute {name!r} has {places} decimal "
                          f"places; at most {MAX_TIME_PLACES} (microseconds)", field=TIME_KEY)


def _with_time(etype: EventType, name: object, source: str | None,
               text: str | None) -> EventType:
    """``etype`` with its declared time attribute (errors located at the ``@time`` key)."""
    line = _find_line(text, etype.name, TIME_KEY)
    if not isinstance(name, str):
        raise SchemaError(f"{etype.name}: {TIME_KEY} must name an attribute, such as "
                          f'"{TIME_KEY}" = "ts"', source=source, line=line, column=1)
    try:
        return EventType(etype.name, etype.attributes, name)
    except SiftbusError as exc:
        raise exc.located(source=source, line=line, column=1) from None


def _find_line(text: str | None, table: str, key: str | None) -> int | None:
    """Line (from 1) of ``[table]`` or of ``key`` inside it (on the error path only).

    Plain string comparisons, no regex built from the names: a name of a million
    characters costs one pass over the text.
    """
    if text is None:
        return None
    lines = text.split("\n")  # read_text made every line end a "\n"
    for i, line in enumerate(lines):
        if _header_name(line) == table:
            if key is None:
                return i + 1
            for j in range(i + 1, len(lines)):
                if lines[j].lstrip().startswith("["):
                    break
                name, eq, _ = lines[j].partition("=")
                if eq and name.strip().strip("\"'") in (key, key.split(".")[0]):
                    return j + 1
            return i + 1
    return None


def _header_name(line: str) -> str | None:
    """The name of a ``[table]`` header line, or None."""
    line = line.strip()
    if not line.startswith("[") or line.startswith("[["):
        return None
    end = line.find("]")
    return line[1:end].strip().strip("\"'") if end > 0 else None


def parse_schema(text: str, *, source: str | None = None,
                 limits: TextLimits = TEXT_LIMITS) -> Schema:
    """Parse schema TOML text; errors carry source and line (nesting deeper than
    ``limits.max_toml_depth`` is refused before ``tomllib`` could recurse on it)."""
    data = parse_toml(text, source=source, kind=SchemaError, limits=limits)
    return Schema.from_dict(data, source=source, text=text)


def load_schema(path: str | os.PathLike[str], *, limits: TextLimits = TEXT_LIMITS) -> Schema:
    """Load a schema TOML file (strict UTF-8, at most ``limits.max_file_bytes``)."""
    source = os.fspath(path)
    return parse_schema(read_text(path, source=source, kind=SchemaError, limits=limits),
                        source=source, limits=limits)
