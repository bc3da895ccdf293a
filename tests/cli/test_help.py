"""The help of every command: whole summaries, placeholders that read as words, every
option described; shell completion is offered."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from siftbus.cli import app
from siftbus.cli._help import polish

COMMAND = typer.main.get_command(app)
polish(COMMAND)


def _paths(c: Any, path: list[str]) -> list[list[str]]:
    out = [path]
    for name, sub in getattr(c, "commands", {}).items():
        out += _paths(sub, [*path, name])
    return out


PATHS = _paths(COMMAND, [])


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = COMMAND.main(args=args, prog_name="siftbus", standalone_mode=False)
    except SystemExit as exc:  # --show-completion leaves through sys.exit
        code = exc.code
    out = capsys.readouterr().out
    assert code in (0, None), out
    return out


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "siftbus")
def test_help_reads_as_words(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _run([*path, "--help"], capsys)
    assert text.startswith(f"Usage: siftbus {' '.join(path)}".rstrip())
    for line in text.splitlines():
        assert not re.search(r"<(str|int|float|path|list\[\w+\])>", line), line
        assert not re.search(r"\{[a-z_]+\}", line.split("  ")[0]), line  # usage and names
        words = line.rstrip()
        assert not (words.endswith("...") and not words.endswith(("[ARGS]...", "...]"))
                    and not re.search(r"[A-Z]\.\.\.$", words)), line  # a summary cut off
        m = re.match(r"\s+(-\w, )?--[\w-]+( [A-Z][A-Z:=.,-]*)?\s*$", line)
        assert m is None or "help" in line, f"an option without a description: {line}"


def test_every_option_is_described() -> None:
    def walk(c: Any) -> list[str]:
        missing = [f"{c.name} {p.opts}" for p in getattr(c, "params", [])
                   if p.name != "help" and not getattr(p, "help", None)]
        for sub in getattr(c, "commands", {}).values():
            missing += walk(sub)
        return missing

    assert walk(COMMAND) == []


def test_summaries_are_whole_sentences(capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(["--help"], capsys)
    assert "Run a broker until interrupted: one of a network config, or a single broker" \
        in " ".join(text.split())


def test_shell_completion_is_offered(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--install-completion" in _run(["--help"], capsys)
    assert "_SIFTBUS_COMPLETE" in _run(["--show-completion", "bash"], capsys)
