"""Where ``siftbus match`` writes its rows: JSON lines, or Arrow/Parquet record batches
(pyarrow imported for those two only)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from siftbus.match.base import Snapshot

FORMATS = ("json", "arrow", "parquet")
ROW_GROUP_EVENTS = 1 << 20
"""Parquet output: at most this many events per row group (Parquet's default length)."""
ROW_GROUP_MATCHES = 1 << 23
"""Parquet output: a row group ends after this many matches (~32 MiB of held indices)."""


class MatchWriter(ABC):
    """Where match rows go: JSON lines, or Arrow/Parquet record batches."""

    @abstractmethod
    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        """Rows ``first, first+1, ...``: CSR of dense profile indices of ``snap``."""

    @abstractmethod
    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        """Rows ``first, first+1, ...`` as lists of ids."""

    def close(self) -> None:  # noqa: B027 - a hook: nothing by default
        """Finish the output (footers)."""


class JsonLinesWriter(MatchWriter):
    """``{"event": N, "matches": [...]}`` per line, exactly what ``json.dumps`` writes.

    With the compiled kernels a whole batch is formatted in one call
    (:func:`siftbus.match.scan_numba.format_matches`) from the ids quoted once per
    snapshot; otherwise the pieces are laid out by array arithmetic and joined once.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._snap: Snapshot | None = None
        self._quoted: Any = None
        self._quoted_str: Any = None

    def _quoted_ids(self, snap: Snapshot) -> Any:
        """Per dense index its id as a JSON string: ``(bytes, offsets)``."""
        import numpy as np

        if self._snap is not snap:
            self._snap = snap
            self._quoted_str = None
            ids = snap.profile_ids
            try:  # unicode ids by a cast (one C loop), not a codec call per id
                raw = np.zeros(0, "S1") if not len(ids) else \
                    ids.astype(f"S{ids.dtype.itemsize // 4}") if ids.dtype.kind == "U" \
                    else np.char.encode(ids, "ascii")
                plain = True
            except UnicodeEncodeError:
                plain = False
            if plain:  # ASCII ids need no escapes: ids are letters, digits and _ - . /
                width = raw.dtype.itemsize
                mat = np.zeros((len(raw), width + 2), np.uint8)
                mat[:, 1:width + 1] = raw.view(np.uint8).reshape(len(raw), width)
                lens = np.char.str_len(raw).astype(np.int64)
                mat[:, 0] = 34
                mat[np.arange(len(raw)), lens + 1] = 34
                keep = np.arange(width + 2)[None, :] < (lens + 2)[:, None]
                qbytes = mat[keep]
                qoff = np.zeros(len(raw) + 1, np.int64)
                np.cumsum(lens + 2, out=qoff[1:])
            else:
                quoted = [json.dumps(i).encode() for i in ids.tolist()]
                qbytes = np.frombuffer(b"".join(quoted) or b"\0", np.uint8)
                qoff = np.zeros(len(quoted) + 1, np.int64)
                np.cumsum([len(q) for q in quoted], out=qoff[1:])
            self._quoted = (qbytes, qoff)
        return self._quoted

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        from siftbus.match import kernel

        qbytes, qoff = self._quoted_ids(snap)
        if kernel.name() == "numba":
            from siftbus.match.events_numba import format_matches

            data = format_matches(first, offsets, profiles, qbytes, qoff)
            raw = getattr(self.out, "buffer", None)
            if raw is not None:  # the bytes as they are: no str made and encoded again
                self.out.flush()
                raw.write(memoryview(data))
            else:
                self.out.write(data.tobytes().decode("ascii"))
            return
        import numpy as np

        if self._quoted_str is None:
            text = qbytes.tobytes().decode("ascii")
            bounds = qoff.tolist()
            self._quoted_str = np.array([text[bounds[i]:bounds[i + 1]]
                                         for i in range(len(bounds) - 1)] or [""], object)
        quoted = self._quoted_str
        # '{"event": N, "matches": [' id ", " id ... ']}\n' laid out by array arithmetic
        n = len(offsets) - 1
        counts = np.diff(offsets)
        width = 2 + counts + np.maximum(counts - 1, 0)  # head, ids, separators, tail
        at = np.zeros(n + 1, np.int64)
        np.cumsum(width, out=at[1:])
        pieces = np.empty(int(at[-1]), object)
        numbers = np.arange(first, first + n).astype(str).astype(object)
        pieces[at[:-1]] = '{"event": ' + numbers + ', "matches": ['
        pieces[at[1:] - 1] = "]}\n"
        row = np.repeat(np.arange(n), counts)
        k = np.arange(len(profiles)) - np.repeat(offsets[:-1], counts)  # index in its row
        pos = at[row] + 1 + 2 * k
        pieces[pos] = quoted[profiles]
        pieces[pos[k < counts[row] - 1] + 1] = ", "
        self.out.write("".join(pieces.tolist()))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        self.out.write("".join(json.dumps({"event": first + i, "matches": list(r)}) + "\n"
                               for i, r in enumerate(rows)))


class ArrowWriter(MatchWriter):
    """Record batches ``event int64, matches list<string>`` to an Arrow IPC file (pyarrow
    is imported only for the Arrow and Parquet formats)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        self.pa = pa
        self.schema = pa.schema([("event", pa.int64()), ("matches", pa.list_(pa.string()))])
        self.sink: Any = pa.ipc.new_file(str(path), self.schema)
        self._snap: Snapshot | None = None
        self._ids: Any = None

    def _ids_of(self, snap: Snapshot) -> Any:
        """The snapshot's ids as an Arrow string array (dense index -> id), made once."""
        if self._snap is not snap:
            self._snap = snap
            self._ids = _string_array(self.pa, snap.profile_ids)
        return self._ids

    def _events(self, first: int, n: int) -> Any:
        import numpy as np

        return _numeric(self.pa, np.arange(first, first + n, dtype=np.int64))

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        pa = self.pa
        matches = pa.ListArray.from_arrays(_numeric(pa, offsets, "int32"),
                                           self._ids_of(snap).take(_numeric(pa, profiles)))
        self.sink.write_batch(pa.record_batch([self._events(first, len(offsets) - 1), matches],
                                              schema=self.schema))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        matches = self.pa.array([list(r) for r in rows], self.pa.list_(self.pa.string()))
        self.sink.write_batch(self.pa.record_batch([self._events(first, len(rows)), matches],
                                                   schema=self.schema))

    def close(self) -> None:
        self.sink.close()


class ParquetMatchWriter(ArrowWriter):
    """The same columns in a Parquet file, written from the dense indices the kernel
    returns: the ids are a dictionary-typed list (``DictionaryArray`` of the CSR's int32
    indices over the snapshot's ids, put under the CSR offsets without a copy), so no id
    string is copied or hashed per match and the file stores each id once per row group.

    Batches are held (indices only: ~4 bytes per match) and written as one row group of up
    to :data:`ROW_GROUP_EVENTS` events or :data:`ROW_GROUP_MATCHES` matches, so the
    dictionary page and the per-group costs are paid rarely. ``event`` is delta-encoded
    (it counts up by one). Statistics are kept for ``event`` only: min/max of the ids in a
    list column select nothing and cost as much as the writing. The Arrow schema is not
    stored, so readers see ``matches`` as ``list<string>``, exactly as before (the ids
    are strings in Parquet either way). Measured choices: ``bench/ingest.py``,
    docs/matching.md.
    """

    def __init__(self, path: Path, compression: str = "snappy") -> None:
        import pyarrow as pa

        self.pa = pa
        self.path = path
        self.compression = compression
        self.schema = pa.schema([("event", pa.int64()), ("matches", pa.list_(
            pa.dictionary(pa.int32(), pa.string())))])
        self.sink = None  # made at the first row group: the dictionary's size sets a limit
        self._snap = None
        self._ids = None
        self._held: list[Any] = []
        self._held_dict: Any = None
        self._held_events = self._held_matches = 0

    def _open(self, dict_bytes: int) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetWriter(
            str(self.path), self.schema, compression=self.compression, store_schema=False,
            use_dictionary=["matches.list.element"],
            column_encoding={"event": "DELTA_BINARY_PACKED"}, write_statistics=["event"],
            # the whole id dictionary in one page, else the writer falls back to plain
            dictionary_pagesize_limit=max(1 << 20, 2 * dict_bytes))

    def _hold(self, first: int, offsets: Any, indices: Any, dictionary: Any) -> None:
        """Hold rows whose ids are ``dictionary[indices]``; a new dictionary (a new
        snapshot, or each ``write_rows`` batch) starts a new row group."""
        pa = self.pa
        if self._held and dictionary is not self._held_dict:
            self._flush()
        values = pa.DictionaryArray.from_arrays(indices, dictionary)
        n = len(offsets) - 1
        self._held.append(pa.record_batch([self._events(first, n), pa.ListArray.from_arrays(
                                               _numeric(pa, offsets, "int32"), values)],
                                          schema=self.schema))
        self._held_dict = dictionary
        self._held_events += n
        self._held_matches += len(values)
        if self._held_events >= ROW_GROUP_EVENTS or self._held_matches >= ROW_GROUP_MATCHES:
            self._flush()

    def _flush(self) -> None:
        if not self._held:
            return
        if self.sink is None:
            self.sink = self._open(self._held_dict.nbytes + 4 * len(self._held_dict))
        table = self.pa.Table.from_batches(self._held, self.schema)
        self.sink.write_table(table, row_group_size=table.num_rows)
        self._held = []
        self._held_events = self._held_matches = 0

    def write_csr(self, first: int, offsets: Any, profiles: Any, snap: Snapshot) -> None:
        pa = self.pa
        self._hold(first, offsets, _numeric(pa, profiles, "int32"), self._ids_of(snap))

    def write_rows(self, first: int, rows: Sequence[Sequence[str]]) -> None:
        import numpy as np

        pa = self.pa
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        flat = pa.array([i for r in rows for i in r], pa.string())
        coded = flat.dictionary_encode()
        self._hold(first, offsets, coded.indices, coded.dictionary)

    def close(self) -> None:
        self._flush()
        if self.sink is None:  # no events: an empty file with the schema
            self.sink = self._open(0)
        self.sink.close()


def _numeric(pa: Any, values: Any, dtype: str | None = None) -> Any:
    """A numpy vector as an Arrow array over the same memory (after a cast to ``dtype``).

    ``pa.array`` would do, but it asks pandas whether the input is one of its objects,
    and importing pandas costs ~0.2 CPU-s: as much as writing 1M events to Parquet."""
    import numpy as np

    arr = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr),
                                 [None, pa.py_buffer(arr)])


def _string_array(pa: Any, values: Any) -> Any:
    """Strings (a numpy or Python sequence) as an Arrow string array, without pandas (see
    :func:`_numeric`)."""
    import numpy as np

    items = [str(v) for v in values] if not isinstance(values, np.ndarray) else values.tolist()
    data = "".join(items).encode("utf-8")
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    if int(lengths.sum()) != len(data):  # not all ASCII: lengths in UTF-8 bytes
        lengths = np.fromiter((len(i.encode("utf-8")) for i in items), np.int64, len(items))
    if len(data) >= 1 << 31:  # beyond int32 offsets: let pyarrow choose
        return pa.array(items, pa.string())
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(items), [None, pa.py_buffer(offsets),
                                                           pa.py_buffer(data)])


def _writer(fmt: str, out: TextIO | Path) -> MatchWriter:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "json":
        if isinstance(out, Path):
            raise ValueError("json output goes to a text stream")
        return JsonLinesWriter(out)
    if not isinstance(out, Path):
        raise ValueError(f"{fmt} output needs a file path (--out)")
    from siftbus.errors import require_extra

    require_extra("spark", f"{fmt} output", "pyarrow")
    return ParquetMatchWriter(out) if fmt == "parquet" else ArrowWriter(out)
