"""``siftbus channel create|list|destroy|serve`` and ``siftbus etcl eval`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest


def siftbus(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "siftbus", *args], capture_output=True,
                          text=True, input=stdin, timeout=60)


EVENTS = [
    {"domain_name": "Telecom", "type_name": "Alarm", "event_name": "down",
     "filterable_data": {"severity": 4, "site": "berlin-3"}},
    {"header": {"fixed_header": {"event_type": {"domain_name": "Telecom", "type_name": "Alarm"},
                                 "event_name": "up"},
                "variable_header": [{"name": "Priority", "value": 2}]},
     "filterable_data": [{"name": "severity", "value": 1}]},
    {"domain_name": "Finance", "type_name": "Quote", "filterable_data": {"severity": "high"}},
]


def test_etcl_eval(tmp_path: Path) -> None:
    f = tmp_path / "e.jsonl"
    f.write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n")
    r = siftbus("etcl", "eval", "--constraint", "$severity > 2 or 'berlin' ~ $site",
                "--events", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["true", "false", "false"]  # 'high' > 2 errors: no match
    r = siftbus("etcl", "eval", "--constraint", "TRUE", "--type", "Telecom,*",
                "--events", "-", stdin=f.read_text())
    assert r.stdout.split() == ["true", "true", "false"]
    r = siftbus("etcl", "eval", "--constraint", "$severity >", "--events", str(f))
    assert r.returncode == 2 and "column 11" in r.stderr and r.stderr.count("\n") == 1
    f.write_text(json.dumps(EVENTS[0]) + "\n{\"header\": 5}\n")
    r = siftbus("etcl", "eval", "--constraint", "TRUE", "--events", str(f))
    assert r.returncode == 2 and "line 2" in r.stderr


def test_channel_commands_on_a_store(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    assert siftbus("channel", "create", "--store", db, "--persistent").stdout.strip() == "1"
    r = siftbus("channel", "create", "--store", db, "--qos", '{"Priority": 99999}')
    assert r.returncode == 2 and "Priority" in r.stderr
    r = siftbus("channel", "list", "--store", db, "--json")
    assert [json.loads(line)["id"] for line in r.stdout.splitlines()] == [1]
    assert siftbus("channel", "destroy", "1", "--store", db).returncode == 0
    assert siftbus("channel", "list", "--store", db, "--json").stdout == ""
    r = siftbus("channel", "destroy", "1", "--store", db)
    assert r.returncode == 2 and "no channel 1" in r.stderr


def test_channel_commands_against_a_server(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "siftbus", "channel", "serve", "--port", "0",
                             "--port-file", str(port_file)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < end
            time.sleep(0.05)
        addr = f"127.0.0.1:{port_file.read_text()}"
        cid = siftbus("channel", "create", "--server", addr, "--qos",
                      '{"OrderPolicy": 1}').stdout.strip()
        r = siftbus("channel", "list", "--server", addr)
        assert r.returncode == 0 and r.stdout.splitlines()[1].startswith(cid)
        assert siftbus("channel", "destroy", cid, "--server", addr).returncode == 0
        r = siftbus("channel", "list", "--server", addr, "--json")
        assert r.stdout == ""
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("args", [["channel", "list"],
                                  ["channel", "list", "--server", "nohost"]])
def test_bad_options(args: list[str]) -> None:
    r = siftbus(*args)
    assert r.returncode == 2 and r.stderr.startswith("siftbus: error:")
