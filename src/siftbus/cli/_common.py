"""Helpers shared by CLI modules (underscore: not a command module)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from siftbus.errors import SiftbusError, excerpt
from siftbus.model import Schema

if TYPE_CHECKING:
    from rich.console import Console


def __getattr__(name: str) -> Console:
    """``stdout`` and ``stderr``: rich consoles, made (and rich imported) when a command
    first asks for one, so that a command printing none (``siftbus match``) skips rich."""
    if name not in ("stdout", "stderr"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    console = Console(stderr=name == "stderr", highlight=False, soft_wrap=True)
    globals()[name] = console
    return console

MAX_ERROR_LINE = 560
"""Longest error line printed (an error is one readable line, never the whole input)."""


def print_error(error: SiftbusError | str) -> None:
    """Print one ``siftbus: error: ...`` line: one line, of readable length, always."""
    print(f"siftbus: error: {excerpt(str(error), MAX_ERROR_LINE)}", file=sys.stderr)


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line and exit non-zero."""
    print_error(message)
    raise SystemExit(code)


def existing_file(path: Path, what: str) -> Path:
    if not path.is_file():
        fail(f"{what} {path} does not exist or is not a file")
    return path


def grid_warnings(lines: Iterable[tuple[int, str]], schema: Schema,
                  source: str | None) -> list[str]:
    """One warning per condition whose decimal constant is finer than its attribute's
    places (``value < 16.123`` on one place is read as ``value < 16.1``). Lines without
    such a number are not parsed again (a cheap scan first: big files stay fast)."""
    from siftbus.lang.profile import finer_than_grid, parse_profile_text

    places = max((getattr(a.domain, "places", 0) for t in schema.types
                  for a in t.attributes), default=0)
    finer = re.compile(r"\d\.\d{" + str(places + 1) + "}")
    out = []
    for n, text in lines:
        if not finer.search(text):
            continue
        try:
            parsed = parse_profile_text(text, source=source, line=n)
            etype = schema.get(parsed.type_name)
            found = finer_than_grid(parsed, etype) if etype is not None else []
        except SiftbusError:
            continue  # the error itself is reported elsewhere
        for wc, reading in found:
            a = etype.attribute(wc.predicate.attr)  # type: ignore[union-attr]
            where = ", ".join(x for x in (source, f"line {wc.line}",
                                          f"column {wc.column}") if x)
            out.append(f"siftbus: warning: {where}: {parsed.type_name}.{a.name} is "
                       f"{a.domain.spec}, a constant here has more decimal places: the "
                       f"condition is read as {reading}")
    return out
