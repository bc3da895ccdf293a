"""A broker store's profiles load through the compiled scanner in bulk
(``ProfileStore.load``) exactly as the grammar reads them row by row: the same
``(client, profile)`` list, or the same error naming the store and the row; and a
restarted broker holds the table it had before (restored in one bulk step)."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.broker.node import BrokerNode
from siftbus.broker.store import ProfileStore
from siftbus.errors import ProfileError, SiftbusError
from siftbus.lang.profile import parse_profile
from siftbus.match import kernel
from siftbus.match.conformance import _hot, random_profile, random_type
from siftbus.match.ingest import scan_profile_texts
from siftbus.model import Profile, Schema, parse_schema
from siftbus.spark.subscriptions import StoredProfiles
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.profiles import encode_profile

CLIENTS = ("c1", "alice", "b.x-2", "Zoë", "c1-9")
ALPHABET = ' \t,()[]{}=<>!:@#"-+./0123456789aeinxAEINX_\\\x00é'


@pytest.fixture(autouse=True)
def compiled() -> Iterator[None]:
    """The compiled scanner on whatever the store's size (``auto`` leaves a small store
    to the grammar, which would make the comparison trivial)."""
    kernel.use("numba")
    try:
        yield
    finally:
        kernel.use()


def reference_load(store: ProfileStore, schema: Schema) -> list[tuple[str, Profile]]:
    """The specification's reading of a store: the grammar on each row, in row order."""
    return store.load(schema, fast=False)


def outcome(fn: Callable[[], Any]) -> object:
    try:
        return ("ok", fn())
    except SiftbusError as exc:
        return ("error", type(exc).__name__, exc.message, exc.line, exc.column, exc.source)


def mutate(rnd: random.Random, text: str) -> str:
    i = rnd.randrange(len(text) + 1)
    kind = rnd.randrange(6)
    if kind == 0:
        return text[:i] + rnd.choice(ALPHABET) + text[i:]
    if kind == 1:
        return text[:i] + text[i + 1:]
    if kind == 2:
        return text[:i] + rnd.choice(ALPHABET) + text[i + 1:]
    if kind == 3:
        return rnd.choice(["", "  ", "# a comment", "\t" + text, text + " ", text + "\n"])
    if kind == 4:
        return text.replace(" ", rnd.choice(["", "  ", "\t"]))
    return text.replace(", ", ",")


def random_store(rnd: random.Random, path: Path, n: int, mutated: float) -> Schema:
    schema = Schema((random_type(rnd, "T"), random_type(rnd, "U", 3)))
    hot = {t.name: _hot(rnd, t) for t in schema}
    store = ProfileStore(path)
    for i in range(n):
        t = rnd.choice(list(schema))
        p = random_profile(rnd, t, f"p{i}", hot[t.name])
        if p is not None:
            store.put(rnd.choice(CLIENTS), p)
    rows = store.connection.execute("SELECT rowid, text FROM profiles").fetchall()
    for rowid, text in rows:
        if rnd.random() < mutated:
            store.connection.execute("UPDATE profiles SET text = ? WHERE rowid = ?",
                                     (mutate(rnd, text), rowid))
    store.close()
    return schema


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40),
       mutated=st.sampled_from([0.0, 0.05, 0.3]))
def test_bulk_load_equals_the_grammar_row_by_row(seed: int, n: int, mutated: float,
                                                 tmp_path: Path) -> None:
    rnd = random.Random(seed)
    path = tmp_path / f"s{seed}-{n}.db"
    path.unlink(missing_ok=True)
    schema = random_store(rnd, path, n, mutated)
    store = ProfileStore(path)
    try:
        assert outcome(lambda: store.load(schema)) == outcome(
            lambda: reference_load(store, schema))
    finally:
        store.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 40),
       mutated=st.sampled_from([0.0, 0.05, 0.3]), strict=st.booleans())
def test_the_spark_reader_of_a_store_equals_the_grammar(seed: int, n: int, mutated: float,
                                                        strict: bool, tmp_path: Path) -> None:
    """The Spark pipeline's reader of a broker's store (``--profiles sqlite:PATH``) scans
    in bulk too: the same profiles (or the same first error, or the same rows skipped)
    as with the scanner off, where every row goes to the grammar."""
    rnd = random.Random(seed)
    path = tmp_path / f"k{seed}-{n}.db"
    path.unlink(missing_ok=True)
    schema = random_store(rnd, path, n, mutated)
    source = StoredProfiles(path)
    fast = outcome(lambda: source.load(schema, strict=strict))
    kernel.use("python")  # the compiled scanner off: the grammar on every row
    assert fast == outcome(lambda: source.load(schema, strict=strict))


SCHEMA = """
[Quote]
symbol = "enum[AAA, BBB, CCC]"
price = "decimal[0, 1000, 2]"
volume = "int[0, 100000]"
"""


def quotes(n: int) -> list[Profile]:
    schema = parse_schema(SCHEMA)
    syms = ("AAA", "BBB", "CCC")
    return [parse_profile(f"q{i}: Quote(symbol = {syms[i % 3]}, price < {i % 900 + 1}.5, "
                          f"volume in [{i}, {i + 500}])", schema) for i in range(n)]


def test_the_scanner_takes_ordinary_rows(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored rows of ordinary profiles never reach the grammar (else the comparison
    above would hold trivially), and they load as they were stored."""
    schema = parse_schema(SCHEMA)
    store = ProfileStore(tmp_path / "s.db")
    want = [(CLIENTS[i % 3], p) for i, p in enumerate(quotes(60))]
    for client, p in want:
        store.put(client, p)
    texts = [t for (t,) in store.connection.execute("SELECT text FROM profiles")]
    assert None not in scan_profile_texts(texts, schema)
    import siftbus.broker.store as module

    def refuse(*_: object, **__: object) -> Profile:
        raise AssertionError("an ordinary row went to the grammar")

    monkeypatch.setattr(module, "parse_profile", refuse)
    assert store.load(schema) == [(c, p.with_id(p.id, c)) for c, p in want]


def test_a_damaged_row_gives_one_error_naming_the_store_and_the_row(tmp_path: Path) -> None:
    schema = parse_schema(SCHEMA)
    path = tmp_path / "s.db"
    store = ProfileStore(path)
    for p in quotes(30):
        store.put("alice", p)
    store.connection.execute("UPDATE profiles SET text = ? WHERE id = 'alice/q17'",
                             ("alice/q17@alice: Quote(symbol = DDD)",))
    with pytest.raises(SiftbusError) as bad:
        store.load(schema)
    assert outcome(lambda: store.load(schema)) == outcome(lambda: reference_load(store, schema))
    assert f"{path}:alice/q17" in str(bad.value) and "DDD" in str(bad.value)
    assert "\n" not in str(bad.value)
    # a broker will not start on it, and the collector is left as it was
    thresholds = gc.get_threshold()
    with pytest.raises(SiftbusError, match="alice/q17"):
        BrokerNode("B1", schema, store=ProfileStore(path))
    assert gc.get_threshold() == thresholds and gc.isenabled()
    # a row that is not text at all (the file was damaged or written by something else)
    store.connection.execute("UPDATE profiles SET text = ? WHERE id = 'alice/q17'",
                             (b"\x00\xff",))
    with pytest.raises(ProfileError, match=r"alice/q17.*not text"):
        store.load(schema)
    store.close()


def test_a_restarted_broker_holds_the_table_it_had(tmp_path: Path) -> None:
    """Several clients' frames (interleaved, some profiles removed) stored; a broker
    started on the store holds the same entries (gid, source, local id, profile) and
    matches as the broker that stored them."""
    schema = parse_schema(SCHEMA)
    path = tmp_path / "s.db"
    first = BrokerNode("B1", schema, store=ProfileStore(path))
    first.transport_send = lambda link, msg: None  # type: ignore[method-assign]
    profiles = quotes(90)
    links = {c: first.client_up(c)[0] for c in CLIENTS[:3]}
    for k in range(0, 90, 15):
        c = CLIENTS[(k // 15) % 3]
        first.handle(links[c], Message(MsgType.SUB, {
            "profiles": [encode_profile(p) for p in profiles[k:k + 15]], "corr": k}))
    first.handle(links["c1"], Message(MsgType.UNSUB, {"ids": ["q3", "q4"], "corr": 99}))
    for link in links.values():
        first.client_down(link)

    def table(b: BrokerNode) -> list[tuple[str, str, str | None, Profile]]:
        return sorted((g, e.src, e.local_id, e.profile)
                      for g, e in b.routing.table.entries.items())

    thresholds = gc.get_threshold()
    again = BrokerNode("B1", schema, store=ProfileStore(path))
    assert gc.get_threshold() == thresholds and gc.isenabled()
    assert len(table(again)) == 88
    assert table(again) == table(first)
    events = _events(schema)
    assert [again.routing.matcher.match(e) for e in events] == [
        first.routing.matcher.match(e) for e in events]


def _events(schema: Schema) -> list[Any]:
    from siftbus.model import parse_event

    return [parse_event(f'{{"type": "Quote", "symbol": "{s}", "price": {p}, '
                        f'"volume": {v}}}', schema)
            for s in ("AAA", "BBB", "CCC") for p in (0.5, 10, 400.25) for v in (5, 60, 700)]
