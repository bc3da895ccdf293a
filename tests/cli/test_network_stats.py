"""``siftbus network stats`` for an operator: fits 100 columns (``--wide`` for all),
says why a broker could not be read (down, auth failed, denied) and exits 1 then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from broker.processes import BUILDING, config_text, free_ports
from siftbus.cli.network import _print_stats, _unreadable
from siftbus.errors import AccessDenied, AuthenticationError, BrokerUnavailable, RemoteError


def test_why_a_broker_could_not_be_read() -> None:
    assert _unreadable(RemoteError("credentials required", kind="AuthenticationError")) \
        == "auth failed"
    assert _unreadable(AuthenticationError("bad certificate")) == "auth failed"
    assert _unreadable(RemoteError("no broker.stats", kind="AccessDenied")) == "denied"
    assert _unreadable(AccessDenied("no")) == "denied"
    assert _unreadable(BrokerUnavailable("cannot connect")) == "down"


def test_an_auth_failure_is_shown_as_such(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "100")
    _print_stats({"B0": {"error": "credentials required", "state": "auth failed"}})
    out = capsys.readouterr()
    assert "auth failed" in out.out and "down" not in out.out
    assert out.err == "siftbus: error: broker B0: credentials required\n"


def test_stats_fit_100_columns_and_a_down_broker_fails(tmp_path: Path) -> None:
    up_port, down_port = free_ports(2)
    cfg = tmp_path / "net.toml"
    cfg.write_text(config_text([up_port]) + f"\n[brokers.B1]\nport = {down_port}\n"
                   'neighbours = ["B0"]\n')
    broker = subprocess.Popen([sys.executable, "-m", "siftbus", "broker", "--schema",
                               str(BUILDING / "schema.toml"), "--port", str(up_port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None and "listening" in broker.stdout.readline()
        env = dict(os.environ, COLUMNS="100")
        run = [sys.executable, "-m", "siftbus", "network", "stats", str(cfg), "--timeout",
               "2"]
        r = subprocess.run(run, capture_output=True, text=True, timeout=60, env=env,
                           check=False)
        assert r.returncode == 1
        lines = r.stdout.splitlines()
        assert max(len(x) for x in lines) <= 100 and "…" not in r.stdout, r.stdout
        b0 = next(x for x in lines if "B0" in x)
        b1 = next(x for x in lines if "B1" in x)
        assert " up " in b0 and " down " in b1
        assert f"broker B1: cannot connect to broker at 127.0.0.1:{down_port}" in r.stderr
        wide = subprocess.run([*run, "--wide"], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, COLUMNS="200"), check=False)
        assert "bytes in" in wide.stdout and "bytes in" not in r.stdout
    finally:
        broker.terminate()
        broker.wait(20)
