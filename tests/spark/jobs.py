"""What the Spark tests feed a pipeline and expect of it: a small schema and profiles, event
files, the notifications they must produce, the ``siftbus`` executable, and a webhook
server that records what it is sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCHEMA_TOML = """\
[Temp]
room = "int[1,20]"
value = "decimal[-40,60,1]"
level = "enum[LOW,MID,HIGH]"
name = "string"

[Door]
open = "int[0,1]"
floor = "int[-1,8]"
"""


PROFILES_TEXT = """\
hot@heaters: Temp(value > 20)
cold@heaters: Temp(value < 5.5, level >= MID)
room3@alice: Temp(room = 3)
rooms@alice: Temp(room in [4, 9], name prefix "a")
door@security: Door(open = 1)
upstairs@security: Door(floor > 4)
all-doors: Door()
"""


def siftbus_exe() -> str:
    """The ``siftbus`` console script of the running interpreter's environment."""
    import sys

    return str(Path(sys.executable).parent / "siftbus")


def write_event_files(directory: Path, files: int, per_file: int, seed: int) -> list[Path]:
    """Seeded random JSON-lines event files (a few bad lines mixed in)."""
    import json
    import random

    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for f in range(files):
        lines = []
        for _ in range(per_file):
            if rng.random() < 0.03:
                lines.append('{"type": "Door", "open": 3, "floor": 0}')
            elif rng.random() < 0.3:
                lines.append(json.dumps({"type": "Door", "open": rng.randint(0, 1),
                                         "floor": rng.randint(-1, 8)}))
            else:
                lines.append(json.dumps({
                    "type": "Temp", "room": rng.randint(1, 20),
                    "value": rng.randint(-400, 600) / 10,
                    "level": rng.choice(["LOW", "MID", "HIGH"]),
                    "name": rng.choice(["a", "ab", "b", "xyz"])}))
        p = directory / f"events-{seed}-{f:03d}.jsonl"
        tmp = directory / f".{p.name}.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.rename(p)  # atomic: a watching stream never sees half a file
        out.append(p)
    return out


def expected_notifications(files: list[Path], profiles_text: str = PROFILES_TEXT
                           ) -> set[tuple[str, int, str]]:
    """(file name, line index, profile id) for every match, by the reference matcher."""
    from siftbus.errors import SiftbusError
    from siftbus.lang.profile import parse_profiles
    from siftbus.match import ReferenceMatcher, add_all
    from siftbus.model import parse_schema
    from siftbus.model.event import parse_event

    schema = parse_schema(SCHEMA_TOML)
    ref = add_all(ReferenceMatcher(), parse_profiles(profiles_text, schema))
    out = set()
    for f in files:
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines()):
            try:
                ev = parse_event(line, schema)
            except SiftbusError:
                continue
            out.update((f.name, i, pid) for pid in ref.match(ev))
    return out


def read_notifications(path: Path) -> list[tuple[str, int, str]]:
    """(file name, event, profile) rows of a Parquet notification sink, duplicates kept."""
    import pyarrow.dataset as ds

    if not path.exists():
        return []
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(
        columns=["source", "event", "profile"])
    return [(Path(s).name, int(e), p) for s, e, p in zip(
        table.column("source").to_pylist(), table.column("event").to_pylist(),
        table.column("profile").to_pylist(), strict=True)]


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    delay: float

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay)
        self.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def webhook_server(delay: float = 0.0) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTP server on 127.0.0.1 that records every POSTed JSON body, answering each
    after ``delay`` seconds; yields (URL, bodies received)."""
    received: list[dict[str, Any]] = []
    handler = type("Hook", (_Hook,), {"received": received, "delay": delay})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=10)
