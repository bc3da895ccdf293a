"""JSON events as they come, matched through the compiled open index.

:class:`JsonEventMatcher` wraps any matcher of the registry with the schema: ``match(line)``
takes one JSON event (text or bytes) and ``match_file(path)`` a JSON-lines file, and both
answer exactly what ``matcher.match(parse_event(line, schema))`` answers. Lines the kernel
of :mod:`siftbus.match.open_numba` reads (see there) are parsed and matched in it, on the
matcher's open index (the residual side list of the ``index`` and ``counting`` engines,
or an :class:`~siftbus.match.open_index.OpenIndexMatcher` itself); every other line, and
every event type the kernel does not take, goes through the specification's parser and
the matcher. An input error is the one the specification's reader raises, with its line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from siftbus.errors import SiftbusError
from siftbus.match.base import Matcher
from siftbus.match.columns import str_array
from siftbus.match.open_index import OpenIndexMatcher
from siftbus.match.open_program import OpenProgram, compile_program
from siftbus.model import Schema, parse_event, read_events
from siftbus.model.textio import BOM, TEXT_LIMITS

CHUNK_BYTES = 1 << 22
"""Bytes of a file read and matched at a time (whole lines)."""


def open_side(matcher: Matcher) -> OpenIndexMatcher | None:
    """The open index a matcher keeps its extended profiles in, if it has one."""
    if isinstance(matcher, OpenIndexMatcher):
        return matcher
    side = getattr(matcher, "_side_list", None)
    got = side() if callable(side) else None
    return got if isinstance(got, OpenIndexMatcher) else None


@dataclass(frozen=True, slots=True)
class Ids:
    """Dense index -> id, the one thing the match writers read of a snapshot."""

    profile_ids: np.ndarray


@dataclass(slots=True)
class Chunk:
    """Match rows of consecutive events: as CSR over ``ids`` when every line took the
    kernel, else as lists of ids."""

    first: int
    n: int
    offsets: Any = None
    profiles: Any = None
    ids: Ids | None = None
    rows: list[list[str]] | None = None


@dataclass(frozen=True, slots=True)
class MatchArrays:
    """Matches of consecutive events as (event, profile) pairs, what a batch user in the
    same process reads: event ``events[k]`` (its number in the input from 0, blank lines
    not counted) satisfies profile ``ids[profiles[k]]``. Pairs come in event order, each
    event's profiles in id order; ``n`` events are covered from ``first`` (those without
    a match have no pair)."""

    first: int
    n: int
    events: np.ndarray
    """int64 event numbers."""
    profiles: np.ndarray
    """int32 indices into ``ids``."""
    ids: np.ndarray
    """Index -> profile id."""


class JsonEventMatcher:
    """Match JSON event lines with ``matcher`` under ``schema`` (see the module text)."""

    def __init__(self, matcher: Matcher, schema: Schema, *, compiled: bool | None = None
                 ) -> None:
        self.matcher = matcher
        self.schema = schema
        self.compiled = compiled
        """Use the kernel: ``None`` follows :mod:`siftbus.match.kernel` (numba chosen)."""
        self._prog: OpenProgram | None = None
        self._scratch = np.zeros(0, np.int64)
        self._ids: list[str] = []
        self._out = np.zeros(1024, np.int32)
        self._side: OpenIndexMatcher | None = None
        self._one: Any = None
        self._ids_obj: Ids | None = None

    def program(self) -> OpenProgram | None:
        """The compiled open index at the matcher's current version (``None`` when no
        type compiles)."""
        if self.compiled is False:
            return None
        if self.compiled is None:
            from siftbus.match import kernel

            if kernel.name() != "numba":
                return None
        side = self._side = open_side(self.matcher)
        if side is None or not len(side):
            return None
        prog = self._prog
        if prog is None or prog.version != side.version:
            from siftbus.match.open_numba import match_one, scratch_for

            self._one = match_one
            prog = self._prog = compile_program(side)
            self._scratch = scratch_for(prog.n_cids, prog.n_profiles, prog.n_fields)
            self._ids = prog.profile_ids.tolist()
        return prog if prog.types else None

    def match(self, line: str | bytes) -> list[str]:
        """The ids (sorted) of the profiles one JSON event satisfies."""
        prog = self._prog
        side = self._side
        if prog is None or side is None or prog.version != side.version:
            prog = self.program()
        if prog is not None and prog.types:
            data = line.encode() if isinstance(line, str) else line
            out = self._out
            n = self._one(np.frombuffer(data, np.uint8), prog.prog, prog.pbytes,
                          self._scratch, out)
            if n >= 0:
                ids = self._ids
                return [ids[i] for i in out[:n].tolist()]
            while n == -2:
                out = self._out = np.zeros(2 * len(out), np.int32)
                n = self._one(np.frombuffer(data, np.uint8), prog.prog, prog.pbytes,
                              self._scratch, out)
            if n >= 0:
                return [self._ids[i] for i in out[:n].tolist()]
        text = line.decode() if isinstance(line, bytes) else line
        return self.matcher.match(parse_event(text, self.schema))

    def match_file(self, path: str | os.PathLike[str]) -> Iterator[Chunk]:
        """Match rows of every event of a JSON-lines file, chunk by chunk."""
        source = os.fspath(path)
        first = 0
        lineno = 0
        with open(path, "rb") as f:
            carry = b""
            at_start = True
            while True:
                block = f.read(CHUNK_BYTES)
                data = carry + block
                if at_start:
                    if data.startswith(BOM):
                        data = data[len(BOM):]
                    at_start = False
                if not block:
                    cut = len(data)
                else:
                    cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1)) + 1
                    if cut <= 0:
                        carry = data
                        continue
                carry = data[cut:]
                if cut:
                    chunk, lineno = self._chunk(data[:cut], first, lineno, path, source)
                    if chunk.n:
                        yield chunk
                    first += chunk.n
                if not block:
                    return

    def match_file_arrays(self, path: str | os.PathLike[str]) -> Iterator[MatchArrays]:
        """:meth:`match_file` as arrays of pairs (no id strings built per match)."""
        for chunk in self.match_file(path):
            if chunk.rows is None:
                assert chunk.ids is not None
                events = np.repeat(np.arange(chunk.first, chunk.first + chunk.n),
                                   np.diff(chunk.offsets))
                yield MatchArrays(chunk.first, chunk.n, events, chunk.profiles,
                                  chunk.ids.profile_ids)
                continue
            prog = self._prog
            known = prog.profile_ids.tolist() if prog is not None else []
            index = {pid: i for i, pid in enumerate(known)}
            flat: list[int] = []
            counts: list[int] = []
            for row in chunk.rows:  # some line took the parser: its ids looked up
                counts.append(len(row))
                for pid in row:
                    got = index.get(pid)
                    if got is None:
                        got = index[pid] = len(known)
                        known.append(pid)
                    flat.append(got)
            events = np.repeat(np.arange(chunk.first, chunk.first + chunk.n), counts)
            yield MatchArrays(chunk.first, chunk.n, events, np.array(flat, np.int32),
                              str_array(known))

    def _chunk(self, data: bytes, first: int, lineno: int, path: Any,
               source: str) -> tuple[Chunk, int]:
        from siftbus.match.open_numba import BLANK, MATCHED, line_bounds, match_lines

        buf = np.frombuffer(data, np.uint8)
        starts, ends = line_bounds(buf)
        n_lines = len(starts)
        prog = self.program()
        status = np.full(n_lines, 2, np.int8)
        offsets = np.zeros(n_lines + 1, np.int64)
        out = self._out
        if prog is not None:
            while True:
                if len(out) < 16 * n_lines:
                    out = self._out = np.zeros(16 * n_lines + 1024, np.int32)
                done = match_lines(buf, starts, ends, prog.prog, prog.pbytes, self._scratch,
                                   status, offsets, out)
                if done == n_lines:
                    break
                out = self._out = np.zeros(2 * len(out), np.int32)
        too_long = (ends - starts) > TEXT_LIMITS.max_line_bytes
        status[too_long] = 2
        if prog is not None and not (status == 2).any():
            keep = status == MATCHED
            counts = np.diff(offsets)[keep]
            off = np.zeros(int(keep.sum()) + 1, np.int64)
            np.cumsum(counts, out=off[1:])
            profiles = out[:int(offsets[-1])].copy()
            if self._ids_obj is None or self._ids_obj.profile_ids is not prog.profile_ids:
                # one object per program: writers cache what they derive from it
                self._ids_obj = Ids(prog.profile_ids)
            return Chunk(first, len(counts), off, profiles, self._ids_obj), lineno + n_lines
        rows: list[list[str]] = []
        ids = self._ids
        st = status.tolist()
        for i in range(n_lines):
            if st[i] == BLANK:
                continue
            if st[i] == MATCHED:
                rows.append([ids[k] for k in out[offsets[i]:offsets[i + 1]].tolist()])
                continue
            raw = data[starts[i]:ends[i]]
            try:
                text = raw.decode("utf-8")
                if not text.strip():
                    continue
                event = parse_event(text, self.schema, source=source, lineno=lineno + i + 1)
            except (SiftbusError, UnicodeDecodeError):
                for _ in read_events(path, self.schema):  # the specification's error
                    pass
                raise
            rows.append(self.matcher.match(event))
        return Chunk(first, len(rows), rows=rows), lineno + n_lines
