"""A session numbers the rows of every delivery in publication order, whatever the mix
of event types and whichever rows a subscriber's profiles matched (issue 30: numbered
block by block, a batch of Temperature and Motion rows got its numbers out of order).
Differential: the numbers' order against the publication order, the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from siftbus.broker.sessions import Session, SessionLimits
from siftbus.model import Event, parse_schema
from siftbus.wire.events import Envelope, blocks_of_envelopes

SCHEMA = parse_schema('[A]\nx = "int[0,9]"\n\n[B]\nx = "int[0,9]"\n\n[C]\nx = "int[0,9]"\n')
TYPES = [SCHEMA["A"], SCHEMA["B"], SCHEMA["C"]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1,
                         max_size=12), min_size=1, max_size=4))
def test_rows_are_numbered_in_publication_order(batches: list[list[tuple[int, bool]]]
                                                ) -> None:
    s = Session("m", SessionLimits(), 0.0)
    want: list[int] = []
    seq = 0
    for batch in batches:
        envs = []
        for kind, _ in batch:
            envs.append(Envelope(Event(TYPES[kind], (kind,)), "B0/p", seq, 0.0))
            seq += 1
        items = []
        for block in blocks_of_envelopes(envs):
            # the subscriber's profiles matched some rows: the rest never reach it
            keep = np.array([batch[i][1] for i in (block.at.tolist() if block.at is not None
                                                   else range(len(batch)))])
            rows = np.flatnonzero(keep)
            if len(rows):
                items.append((block.take(rows), np.ones(len(rows), np.int32),
                              ["p"] * len(rows)))
        want += [int(e.seq) for e, (_, hit) in zip(envs, batch, strict=True) if hit]
        s.append(items, 0.0)
    got = {c.first + i: int(q) for c in s.chunks for i, q in enumerate(c.block.seq.tolist())}
    assert [got[n] for n in sorted(got)] == want
    assert sorted(got) == list(range(1, len(want) + 1))
    assert all(c.block.at is None for c in s.chunks)
