"""The examples in examples/channels run (in process, and the remote ones against a
channel server on 127.0.0.1)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "channels"


def run(*args: str) -> str:
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60,
                       cwd=EXAMPLES)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("name, expected", [
    ("push_supplier.py", "pushed 8 events; the channel accepted 8"),
    ("pull_supplier.py", "pulled 6 events"),
    ("push_consumer.py", "batch: [('room-0', 22.0)"),  # priority first, filter > 20
    ("pull_consumer.py", "pulled: room-0 {'room': 0, 'celsius': 22.0}"),
    ("federated.py", "B3's consumer got: [{'room': 12, 'value': 21.5}, "
                     "{'room': 14, 'value': 22.0}]\nevents B2 forwarded to B3: 2"),
    ("typed.py", "refused: Thermo.reading(): parameter 'room' must be int, not str ('12')\n"
                 "reading: room 12 21.5 C\n"
                 "structured: %TYPED {'operation': 'Thermo::reading', 'room': 3, 'value': 19.0}"),
])
def test_in_process_examples(name: str, expected: str) -> None:
    assert expected in run(name)


def test_remote_examples(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    server = subprocess.Popen([sys.executable, "-m", "siftbus.channel.remote", "--port-file",
                               str(port_file)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not port_file.exists():
            assert server.poll() is None and time.monotonic() < end
            time.sleep(0.05)
        addr = f"127.0.0.1:{port_file.read_text()}"
        assert "created channel 1" in run("push_supplier.py", "--server", addr)
        consumer = subprocess.Popen([sys.executable, "pull_consumer.py", "--server", addr,
                                     "--channel", "1", "--seconds", "3"], cwd=EXAMPLES,
                                    stdout=subprocess.PIPE, text=True)
        pushed = subprocess.Popen([sys.executable, "push_consumer.py", "--server", addr,
                                   "--channel", "1", "--seconds", "3"], cwd=EXAMPLES,
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        run("push_supplier.py", "--server", addr, "--channel", "1", "-n", "4")
        out, _ = consumer.communicate(timeout=30)
        assert out.count("pulled:") == 4
        out, _ = pushed.communicate(timeout=30)
        assert out.count("pushed:") == 1  # the filter lets 21.0 through, not 18-20
    finally:
        server.terminate()
        server.wait(10)
