"""Streaming latency as ``bench/spark_stream.py`` measures it: each event timed from its
arrival to its delivery at a broker subscriber (``siftbus.spark.latency``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from siftbus.spark.latency import DeliveryClock, StreamWorkload, measure_stream, percentile

SCHEMA = """[Reading]
seq = "int[0,1000000]"
room = "int[0,9]"
"""


def test_clock_times_each_event_from_its_arrival_to_its_delivery() -> None:
    clock = DeliveryClock()
    clock.arrive(range(0, 50), 100.0)
    clock.arrive(range(50, 100), 101.0)
    for s in range(100):
        # Event s is published 0.2 s after its arrival and received s/100 s after that.
        base = 100.0 if s < 50 else 101.0
        clock.deliver(s, base + 0.2, when=base + 0.2 + s / 100)
    clock.deliver(7, 0.0, when=200.0)  # a second delivery: counted, not timed
    r = clock.result("watch", 100.0, range(0, 100))
    lat = sorted(0.2 + s / 100 for s in range(100))
    assert (r.events, r.delivered, r.repeats) == (100, 100, 1)
    assert r.p50 == pytest.approx(lat[49]) and r.p99 == pytest.approx(lat[98])
    assert r.max == pytest.approx(lat[-1]) and r.spark_p50 == pytest.approx(0.2)
    assert r.seconds == pytest.approx(101.0 + 0.2 + 0.99 - 100.0)
    missing = clock.result("watch", 100.0, range(0, 101))
    assert (missing.events, missing.delivered) == (101, 100)


def test_percentile_is_a_value_that_occurred() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    assert percentile([], 50) != percentile([], 50)  # nan


@pytest.mark.spark
@pytest.mark.slow
def test_stream_delivers_every_event_and_times_it(tmp_path: Path) -> None:
    lines = ["all@ops: Reading(seq >= 0)", "r3@u1: Reading(room = 3)"]

    def line(seq: int) -> str:
        return json.dumps({"type": "Reading", "seq": seq,
                           "room": random.Random(seq).randrange(10)})

    load = StreamWorkload(SCHEMA, "\n".join(lines) + "\n", ("Reading(seq >= 0)",), line)
    [r] = measure_stream(tmp_path, load, phases=[(40.0, 2.0)], warmup_events=5,
                         start_timeout=240, drain_timeout=120,
                         extra_args=["--shuffle-partitions", "2"])
    log = (tmp_path / "stream.log").read_text()
    assert (r.events, r.delivered, r.repeats) == (80, 80, 0), log
    # No delivery before its arrival; none later than the time the phase took.
    assert 0 < r.spark_p50 <= r.p50 <= r.p99 <= r.max <= r.seconds, r
    assert r.events_per_s > 0
    # The stream ran its batches (warm-up and phase) and stopped on our Ctrl-C.
    assert "batch 1:" in log and "stopped" in log, log


def test_the_demo_network_times_what_its_subscribers_receive() -> None:
    # The demo's latency line is computed from these reception times.
    import time

    from siftbus.client import SyncClient
    from siftbus.lang.profile import parse_profile
    from siftbus.model import parse_schema
    from siftbus.spark.demo import LiveNetwork

    schema = parse_schema(SCHEMA)
    net = LiveNetwork(schema)
    seen: list[int] = []
    try:
        net.start(("B0",))
        net.subscribe("ops", [parse_profile("hot: Reading(room = 3)", schema)], "B0",
                      on_note=lambda n: seen.append(int(n.event["seq"])))
        before = time.time()
        with SyncClient.connect("127.0.0.1", net.brokers["B0"], name="pub") as pub:
            pub.publish_batch([json.dumps({"type": "Reading", "seq": s, "room": s % 10})
                               for s in range(30)], ack=True)
        assert net.wait_for({"ops": 3}, timeout=20)
    finally:
        net.close()
    assert sorted(seen) == [3, 13, 23]
    assert len(net.received_at) == 3 and all(t >= before for t in net.received_at)
