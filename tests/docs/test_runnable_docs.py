"""Every ```sh block of README.md and docs/*.md runs as written, from the repository root,
on shipped files, against real servers.

The convention (docs/README.md says it for writers):

* a ```sh block is run; ```text, ```console and every other fence are shown, not run;
* each block runs in a fresh ``bash -e -o pipefail`` from the root of a temporary copy of
  the repository (its git-shipped files only), with the project's ``siftbus`` on PATH (the
  venv's ``bin`` first, the checkout's ``src`` first on PYTHONPATH) and ``.venv`` linked
  there, so ``source .venv/bin/activate`` and ``.venv/bin/siftbus`` work as in a clone;
* HTML comments right before a block steer it, one directive each:
  ``<!-- docs-test: background -->`` starts the block as a background process (a server),
  killed when the file's blocks are done; the next block starts once the background
  output has a line containing ``listening`` (or the text of
  ``<!-- docs-test: background until "network up" -->``);
  ``<!-- docs-test: expect "text" -->`` asserts the block's output (stdout and stderr)
  contains ``text`` (for a background block: by the end of the file's blocks);
  ``<!-- docs-test: timeout 90 -->`` gives a long block more than the default 60 s;
  ``<!-- docs-test: skip: reason -->`` for the few blocks that cannot run here.

One test per file. Two files run at the same time (two cores) when the fixed ports they
use (written in their blocks or in the config files their blocks name) are disjoint; the
others wait their turn, so a reader's ports are never shared between two files' servers.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT = 60.0
READY_TIMEOUT = 60.0

_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")


@dataclass
class Block:
    file: str
    line: int
    code: str
    background: bool = False
    until: str = "listening"
    expect: list[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    skip: str | None = None


def _directives(text: str, start: int) -> list[str]:
    """The docs-test comments on the lines right above offset ``start`` (blank lines
    between them allowed)."""
    out: list[str] = []
    lines = text[:start].splitlines()
    for raw in reversed(lines):
        s = raw.strip()
        if not s:
            continue
        m = _DIRECTIVE.fullmatch(s)
        if m is not None:
            out.append(m.group(1))
        elif not (s.startswith("<!--") and s.endswith("-->")):
            break  # other comments (a test's marker) may sit among the directives
    return list(reversed(out))


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        if m.group(1) != "sh":
            continue
        b = Block(str(path.relative_to(ROOT)), text.count("\n", 0, m.start()) + 1,
                  m.group(2))
        for d in _directives(text, m.start()):
            if d.startswith("skip:"):
                b.skip = d[5:].strip()
            elif d.startswith("background"):
                b.background = True
                u = re.fullmatch(r'background\s+until\s+"(.*)"', d)
                if u:
                    b.until = u.group(1)
                elif d != "background":
                    raise ValueError(f"{b.file}:{b.line}: bad directive {d!r}")
            elif e := re.fullmatch(r"""expect\s+(?:"(.*)"|'(.*)')""", d):
                b.expect.append(e.group(1) if e.group(1) is not None else e.group(2))
            elif t := re.fullmatch(r"timeout\s+(\d+(?:\.\d+)?)", d):
                b.timeout = float(t.group(1))
            else:
                raise ValueError(f"{b.file}:{b.line}: unknown docs-test directive {d!r}")
        out.append(b)
    return out


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _shipped(dest: Path) -> None:
    """The repository as a clone has it: tracked and not-ignored files (no .venv, no
    outputs of earlier runs)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
        capture_output=True, check=True).stdout.decode().split("\0")
    for name in files:
        src = ROOT / name
        if not name or not src.is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    venv = Path(sys.prefix)
    (dest / ".venv").symlink_to(venv, target_is_directory=True)


def _env(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    env["SIFTBUS_DOCS_TEST"] = "1"
    env.pop("SIFTBUS_TOKEN", None)
    env["COLUMNS"] = "100"
    return env


class _Background:
    def __init__(self, block: Block, repo: Path, env: dict[str, str], log: Path) -> None:
        self.block = block
        self.log = log
        self.out = log.open("wb")
        self.proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.code],
                                     cwd=repo, env=env, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.proc.poll() is not None:
                if needle in self.text():
                    return
                break
            time.sleep(0.1)
        pytest.fail(f"{self.block.file}:{self.block.line}: background block "
                    f"{'exited' if self.proc.poll() is not None else 'timed out'} "
                    f"before printing {needle!r}:\n{self.text()[-3000:]}")

    def interrupt(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.interrupt()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        # whatever it started in its group (brokers of `network up`)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.out.close()


def _foreground(b: Block, repo: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a block to its end (its exit status and output); on its timeout the block's
    whole process group is killed, servers it started included, and the test fails."""
    p = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", b.code], cwd=repo, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=b.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        out, _ = p.communicate()
        pytest.fail(f"{b.file}:{b.line}: the block did not finish within {b.timeout:g} s:\n"
                    f"{b.code}\n--- output\n{out[-3000:]}")
    _kill_group(p)  # what it left running in the background (`cmd &`)
    return p.returncode, out


def _kill_group(p: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)


def _run_file(doc: Path, work: Path, log: list[str]) -> None:
    todo = blocks(doc)
    repo = work / "repo"
    _shipped(repo)
    env = _env(repo)
    background: list[_Background] = []
    try:
        for i, b in enumerate(todo):
            if b.skip is not None:
                continue
            where = f"{b.file}:{b.line}"
            began = time.monotonic()
            if b.background:
                bg = _Background(b, repo, env, work / f"bg{i}.log")
                background.append(bg)
                bg.wait_for(b.until, READY_TIMEOUT)
                log.append(f"{where}: ready in {time.monotonic() - began:.1f} s")
                continue
            code, out = _foreground(b, repo, env)
            log.append(f"{where}: {time.monotonic() - began:.1f} s")
            assert code == 0, (f"{where}: exit {code}\n{b.code}\n"
                                       f"--- output\n{out[-4000:]}")
            for needle in b.expect:
                assert needle in out, f"{where}: {needle!r} not in the output:\n{out[-4000:]}"
        for bg in background:
            for needle in bg.block.expect:
                bg.wait_for(needle, 20)
    finally:
        began = time.monotonic()
        for bg in reversed(background):
            bg.interrupt()  # all at once: each may take seconds to shut down
        for bg in reversed(background):
            bg.stop()
            log.append(f"{bg.block.file}:{bg.block.line}: stopped at "
                       f"{time.monotonic() - began:.1f} s, exit {bg.proc.returncode}")


def _has_runnable(doc: Path) -> bool:
    return any(b.skip is None for b in blocks(doc))


_PORT_IN_CODE = re.compile(r"(?:--port\s+|-p\s+|127\.0\.0\.1:|localhost:)(\d{2,5})\b")
_PORT_IN_FILE = re.compile(r"^\s*(?:port\s*=\s*|listener\s+)(\d{2,5})\b", re.M)
_PATH = re.compile(r"[\w./-]+\.(?:toml|conf)\b")


def fixed_ports(doc: Path) -> set[int]:
    """The ports a file's blocks use: in their text, or in the configs they name."""
    ports: set[int] = set()
    for b in blocks(doc):
        if b.skip is not None:
            continue
        ports.update(int(p) for p in _PORT_IN_CODE.findall(b.code))
        for name in _PATH.findall(b.code):
            f = ROOT / name
            if f.is_file():
                ports.update(int(p) for p in _PORT_IN_FILE.findall(f.read_text("utf-8")))
    return ports


@dataclass
class _Outcome:
    log: list[str] = field(default_factory=list)
    error: BaseException | None = None


def _run_all(docs: list[Path], work: Path, slots: int = 2) -> dict[Path, _Outcome]:
    """Every file's blocks, ``slots`` files at a time, never two whose ports meet."""
    ports = {d: fixed_ports(d) for d in docs}
    out = {d: _Outcome() for d in docs}
    todo = list(docs)
    running: set[Path] = set()
    cond = threading.Condition()

    def run(doc: Path) -> None:
        try:
            _run_file(doc, work / doc.stem, out[doc].log)
        except BaseException as exc:  # pytest.fail's Failed too: re-raised by the test
            out[doc].error = exc
        finally:
            with cond:
                running.discard(doc)
                cond.notify_all()

    threads = []
    with cond:
        while todo:
            busy = set().union(*(ports[r] for r in running)) if running else set()
            doc = next((d for d in todo if not ports[d] & busy), None)
            if doc is None or len(running) >= slots:
                cond.wait(5)
                continue
            todo.remove(doc)
            running.add(doc)
            t = threading.Thread(target=run, args=(doc,), daemon=True)
            threads.append(t)
            t.start()
    for t in threads:
        t.join()
    return out


_RUNNABLE = [d for d in _doc_files() if _has_runnable(d)]


@pytest.fixture(scope="module")
def doc_outcomes(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[Path, _Outcome]:
    """The selected files' blocks, run side by side where their ports allow."""
    chosen = [item.callspec.params["doc"] for item in request.session.items
              if getattr(item, "originalname", "") == "test_sh_blocks_run_as_written"]
    return _run_all([d for d in _RUNNABLE if d in chosen], tmp_path_factory.mktemp("docs"))


@pytest.mark.slow
@pytest.mark.parametrize("doc", _RUNNABLE, ids=lambda d: d.name)
def test_sh_blocks_run_as_written(doc: Path, doc_outcomes: dict[Path, _Outcome]) -> None:
    outcome = doc_outcomes[doc]
    print("\n".join(outcome.log))
    if outcome.error is not None:
        raise outcome.error


def test_the_fixed_ports_of_a_file_are_found() -> None:
    """The README's network (7400-7403 in examples/network/net.toml) and composite.md's
    broker on 7400 meet, so they never run together; profile-language.md uses none."""
    by_name = {d.name: d for d in _RUNNABLE}
    assert {7390, 7400, 7401, 1883} <= fixed_ports(by_name["README.md"])
    assert 7400 in fixed_ports(by_name["composite.md"])
    assert not fixed_ports(by_name["profile-language.md"])


def test_every_directive_is_understood() -> None:
    """A misspelt directive fails here, not silently in a reader's terminal."""
    for doc in _doc_files():
        blocks(doc)


def test_the_block_reader_follows_the_convention(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('Intro\n\n```text\nshown only\n```\n\n<!-- docs-test: background -->\n'
                    '```sh\nserver\n```\n<!-- docs-test: expect "x" -->\n'
                    '<!-- docs-test: timeout 5 -->\n```sh\necho x\n```\n'
                    '<!-- docs-test: skip: needs a cluster -->\n```sh\nspark-submit\n```\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        got = blocks(page)
    finally:
        ROOT = saved
    assert [b.code for b in got] == ["server\n", "echo x\n", "spark-submit\n"]
    assert got[0].background and got[0].until == "listening"
    assert got[1].expect == ["x"] and got[1].timeout == 5
    assert got[2].skip == "needs a cluster"
