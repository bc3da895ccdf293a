"""Who owns what, kept in a file beside a server's store so that ownership survives a
restart (the channel service's channels, admins and proxies; the XML endpoint's
subscriptions).

An :class:`OwnersFile` holds rows of JSON scalars, the last one the owning principal's
name; it is rewritten whole on every change (write to a temporary file, then an atomic
rename), so a crash leaves the old file or the new one, never half of one. A file that
cannot be read stops the server with a :class:`~siftbus.errors.ConfigError` naming it:
ownership is never silently forgotten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from siftbus.errors import ConfigError


class OwnersFile:
    """``<store>.owners.json``: rows ``[key..., owner]`` (see the module docstring)."""

    def __init__(self, store: str | Path, what: str) -> None:
        self.path = Path(f"{store}.owners.json")
        self.what = what
        """What the rows are the owners of (for error messages)."""

    def load(self) -> list[list[Any]]:
        """The rows saved last (none when there is no file yet)."""
        if not self.path.is_file():
            return []
        try:
            rows = json.loads(self.path.read_text())
            if not isinstance(rows, list) or not all(
                    isinstance(r, list) and r and isinstance(r[-1], str) for r in rows):
                raise ValueError("expected a list of [key..., owner] rows")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the {self.what} owners file: {exc}",
                              source=str(self.path)) from None
        return rows

    def save(self, rows: Iterable[list[Any]]) -> None:
        """Replace the file's rows (atomically)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(list(rows)))
        os.replace(tmp, self.path)


__all__ = ["OwnersFile"]
