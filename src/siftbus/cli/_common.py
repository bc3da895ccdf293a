"""Helpers shared by CLI modules (underscore: not a command module)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
stdout = Console(highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line and exit non-zero."""
    print(f"siftbus: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def existing_file(path: Path, what: str) -> Path:
    if not path.is_file():
        fail(f"{what} {path} does not exist or is not a file")
    return path
