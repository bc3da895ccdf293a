"""Helpers shared by CLI modules (underscore: not a command module)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from siftbus.errors import SiftbusError, excerpt

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=True)

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
