"""The Python workers' own reading of JSON-lines files (spark/ranges.py), without a JVM:
cut into ranges anywhere, the lines, their numbers and which are events are exactly what
the one reader of ``siftbus check`` and ``siftbus match`` (textio.read_lines) gives."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.model.textio import BOM, read_lines
from siftbus.spark.ranges import count_events, plan_ranges, range_lines

_PIECES = st.sampled_from([b"\n", b"\r\n", b"\r", b" ", b"\t", b"\x1c", b"{}", b'{"a": 1}',
                           b"x", b"\xff", b"\xc2\x85", b"\xe2\x80\xa8", b"\r\r\n", b"\n\n"])


@settings(max_examples=150, deadline=None)
@given(data=st.lists(_PIECES, max_size=40).map(b"".join), bom=st.booleans(),
       split=st.integers(1, 12))
def test_ranges_read_every_line_as_the_one_reader(tmp_path_factory: object, data: bytes,
                                                  bom: bool, split: int) -> None:
    raw = (BOM if bom else b"") + data
    path = Path(tmp_path_factory.mktemp("r")) / "e.jsonl"  # type: ignore[attr-defined]
    path.write_bytes(raw)
    want: list[bytes] = []
    for _, text in read_lines(io.BytesIO(raw), on_error=lambda e: None):
        want.append(text.encode("utf-8"))
    ranges = plan_ranges([str(path)], split)
    # ranges tile the file, each starting where the last stopped
    if raw:
        assert [a for _, a, _ in ranges] == [0, *[b for _, _, b in ranges[:-1]]]
        assert ranges[-1][2] == len(raw)
    else:
        assert ranges == []
    got = [line for s, a, b in ranges for line in range_lines(s, a, b)]
    good = [g for g in got if _utf8(g)]
    assert good == want  # read_lines skips the bad lines here (on_error), so compare those
    events = sum(count_events(range_lines(s, a, b)) for s, a, b in ranges)
    assert events == count_events(got)
    assert len(got) == _line_count(raw)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _line_count(raw: bytes) -> int:
    n = 0
    for _ in read_lines(io.BytesIO(raw), on_error=lambda e: None):
        n += 1
    errors: list[object] = []
    for _ in read_lines(io.BytesIO(raw), on_error=errors.append):
        pass
    return n + len(errors)


def test_a_line_start_between_cr_and_lf_is_none() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "e.jsonl"
        p.write_bytes(b"ab\r\ncd\r\nef")
        # a cut asked for at every byte lands on a line start, never inside "\r\n"
        for split in range(1, 10):
            starts = {a for _, a, _ in plan_ranges([str(p)], split)}
            assert starts <= {0, 4, 8}, (split, starts)
