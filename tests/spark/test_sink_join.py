"""A batch job's match lines: the executors' parts of one file are joined into
``matches.jsonl`` by moving the first and appending the others in the kernel
(``copy_file_range``), or by copying where the filesystem cannot; both give the parts'
bytes in order and leave no part behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from siftbus.spark.sinks import _join_files


def _parts(where: Path) -> tuple[list[Path], bytes]:
    where.mkdir()
    parts = []
    for i, size in enumerate([7, 0, 300_007, 1 << 20]):
        f = where / f"part-{i:05d}.json"
        f.write_bytes(f'{{"event": {i}}}\n'.encode() * (size // 14 + 1))
        parts.append(f)
    return parts, b"".join(p.read_bytes() for p in parts)


@pytest.mark.parametrize("kernel_copies", [True, False])
def test_parts_are_joined_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   kernel_copies: bool) -> None:
    parts, want = _parts(tmp_path / "stage")
    if not kernel_copies:
        def refuse(*args: object) -> int:
            raise OSError(18, "Invalid cross-device link")
        monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    _join_files(parts, tmp_path / "matches.jsonl")
    assert (tmp_path / "matches.jsonl").read_bytes() == want
    assert not any(p.exists() for p in parts)


def test_no_parts_give_an_empty_file(tmp_path: Path) -> None:
    _join_files([], tmp_path / "matches.jsonl")
    assert (tmp_path / "matches.jsonl").read_bytes() == b""
