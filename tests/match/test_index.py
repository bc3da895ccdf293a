"""The PrimAS index against the reference matcher: fixed cases, conformance, hypothesis."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from siftbus.errors import DomainError, DuplicateProfileError, UnknownProfileError
from siftbus.lang.profile import parse_profile
from siftbus.match import Matcher, ReferenceMatcher, kernel, level, leveled, primas
from siftbus.match import cells as cells_module
from siftbus.match import index as index_module
from siftbus.match.conformance import (
    _hot,
    check_matcher,
    random_event,
    random_profile,
    random_type,
)
from siftbus.match.engines import make_matcher
from siftbus.match.index import CompiledIndex, IndexMatcher, MatchCSR, events_to_columns
from siftbus.model import Event, Op, Predicate, Profile, parse_schema

THRESHOLDS = [0.0, 1 / 32, 1.0]

FIG41 = parse_schema('[T4]\na3 = "int[0,200]"\na4 = "int[0,200]"\na5 = "int[0,200]"\n')
FIG41_PROFILES = [
    "p1: T4(a3 = 10, a4 = 20, a5 = 50)",
    "p2: T4(a3 = 40, a4 = 10, a5 = 80)",
    "p3: T4(a3 = 40, a4 = 20, a5 = 100)",
    "p4: T4(a3 = 40, a5 = 100)",
    "p5: T4(a3 = 40, a4 = 20, a5 = 100)",
]


def fig41(threshold: float, pending_limit: int = 0) -> IndexMatcher:
    m = IndexMatcher(threshold, pending_limit=pending_limit)
    for text in FIG41_PROFILES:
        m.add(parse_profile(text, FIG41))
    return m


def ev(values: dict[str, object]) -> Event:
    return Event.of(FIG41["T4"], values)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_bittner_figure_4_1(threshold: float) -> None:
    m = fig41(threshold)
    assert m.match(ev({"a3": 40, "a4": 10, "a5": 80})) == ["p2"]
    assert m.match(ev({"a3": 40, "a4": 20, "a5": 100})) == ["p3", "p4", "p5"]
    assert m.match(ev({"a3": 40, "a4": 7, "a5": 100})) == ["p4"]
    assert m.match(ev({"a3": 41, "a4": 20, "a5": 100})) == []


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("pending_limit", [0, 16])
@pytest.mark.usefixtures("kernels")
def test_conformance(threshold: float, pending_limit: int) -> None:
    check_matcher(lambda: IndexMatcher(threshold, pending_limit=pending_limit), seed=3,
                  rounds=2)


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from(THRESHOLDS),
       pending_limit=st.sampled_from([0, 2, 16]), n_profiles=st.integers(0, 80),
       grouped=st.booleans())
@pytest.mark.usefixtures("kernels")
def test_differential_interleaved(seed: int, threshold: float, pending_limit: int,
                                  n_profiles: int, grouped: bool) -> None:
    """The conformance suite on random seeds: random schemas, every operator,
    interleaved add/remove/match against the reference, per event, in batches (by the
    per-event batch kernel or the grouped-by-cell one) and through snapshots."""
    saved = index_module.GROUPED_MIN, index_module.GROUPED_MIN_PROFILES
    index_module.GROUPED_MIN = 1 if grouped else 10**9
    index_module.GROUPED_MIN_PROFILES = 0
    try:
        check_matcher(lambda: IndexMatcher(threshold, pending_limit=pending_limit),
                      seed=seed, rounds=1, profiles=n_profiles, events=15)
    finally:
        index_module.GROUPED_MIN, index_module.GROUPED_MIN_PROFILES = saved


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from(THRESHOLDS),
       perm_seed=st.integers(0, 1000), by_events=st.booleans())
def test_evaluation_orders_do_not_change_results(seed: int, threshold: float, perm_seed: int,
                                                 by_events: bool) -> None:
    rnd = random.Random(seed)
    t = random_type(rnd)
    hot = _hot(rnd, t)
    m = IndexMatcher(threshold, pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(60):
        p = random_profile(rnd, t, f"p{i}", hot)
        if p is not None:
            m.add(p)
            ref.add(p)
    evs = [random_event(rnd, t, hot) for _ in range(30)]
    want = ref.match_batch(evs)
    assert m.match_batch(evs) == want
    names = list(t.names)
    random.Random(perm_seed).shuffle(names)
    m.optimize(order={t.name: names})
    assert m.evaluation_order(t.name) == tuple(names)
    assert m.match_batch(evs) == want
    assert [m.match(e) for e in evs] == want
    m.optimize(evs if by_events else None)
    assert m.match_batch(evs) == want
    assert [m.match(e) for e in evs] == want


def test_optimize_puts_selective_attribute_first() -> None:
    schema = parse_schema('[S]\nwide = "int[0,999]"\nnarrow = "int[0,999]"\n')
    m = IndexMatcher(pending_limit=0)
    for i in range(200):
        m.add(parse_profile(f"p{i}: S(wide < 900, narrow in [{i}, {i + 500}])", schema))
    assert m.evaluation_order("S") == ("narrow", "wide")
    # Events that always sit on narrow = 300, wide = 950 make "wide" the selective one.
    evs = [Event.of(schema["S"], {"wide": 950, "narrow": 300}) for _ in range(50)]
    m.optimize(evs)
    assert m.evaluation_order("S")[0] == "wide"
    assert m.match(evs[0]) == []


def test_errors_and_protocol() -> None:
    m = fig41(1 / 32)
    assert isinstance(m, Matcher)
    with pytest.raises(DuplicateProfileError):
        m.add(parse_profile("p1: T4(a3 = 1)", FIG41))
    with pytest.raises(UnknownProfileError):
        m.remove("nope")
    with pytest.raises(UnknownProfileError):
        m.get("nope")
    with pytest.raises(ValueError):
        IndexMatcher(1.5)
    assert len(m) == 5 and "p3" in m and "zz" not in m


def test_snapshot_csr_pickle_and_version() -> None:
    schema = parse_schema('[A]\nx = "int[0,9]"\ns = "string"\n[B]\ny = "enum[L,M,H]"\n')
    m = IndexMatcher(pending_limit=0)
    for text in ['a1@alice: A(x > 3)', 'a2: A(s prefix "ro")', 'a3: A(x = 5, s = "room")',
                 'b1@bob: B(y >= M)', 'b0: B()']:
        m.add(parse_profile(text, schema))
    v0 = m.snapshot().version
    snap = pickle.loads(pickle.dumps(m.snapshot()))
    assert isinstance(snap, CompiledIndex) and snap.version == v0
    a_events = [Event.of(schema["A"], {"x": x, "s": s})
                for x, s in [(5, "room"), (2, "rook"), (9, "x"), (0, "")]]
    cols = events_to_columns(schema["A"], a_events)
    assert cols["x"].dtype == np.int64
    csr = snap.match_columns("A", cols)
    assert isinstance(csr, MatchCSR)
    assert csr.offsets.dtype == np.int64 and csr.profiles.dtype == np.int32
    assert csr.rows(snap.profile_ids) == [["a1", "a2", "a3"], ["a2"], ["a1"], []]
    owners = [str(snap.owners[i]) for i in csr.profiles[: csr.offsets[1]]]
    assert owners == ["alice", "a2", "a3"]
    b = snap.match_columns("B", {"y": np.array([0, 1, 2])})
    assert b.rows(snap.profile_ids) == [["b0"], ["b0", "b1"], ["b0", "b1"]]
    # extra columns are ignored; unknown types match nothing
    cols["extra"] = np.zeros(4)
    assert snap.match_columns("A", cols).n_matches == 5
    assert snap.match_columns("Nope", {"q": np.zeros(3)}).offsets.tolist() == [0, 0, 0, 0]
    m.remove("a1")
    assert m.snapshot().version > v0
    assert m.match_columns("A", cols).rows(m.snapshot().profile_ids)[0] == ["a2", "a3"]


def test_match_columns_record_batch_and_bad_columns() -> None:
    pa = pytest.importorskip("pyarrow")
    schema = parse_schema('[A]\nx = "int[0,9]"\ns = "string"\n')
    m = IndexMatcher(pending_limit=0)
    m.add(parse_profile('a1: A(x > 3, s != "no")', schema))
    batch = pa.record_batch({"x": [4, 2, 9], "s": ["yes", "yes", "no"], "other": [1, 2, 3]})
    csr = m.match_columns("A", batch)
    assert csr.offsets.tolist() == [0, 1, 1, 1]
    with pytest.raises(DomainError):
        m.match_columns("A", {"x": np.array([10]), "s": np.array(["a"], dtype=object)})
    with pytest.raises(DomainError):
        m.match_columns("A", {"x": np.array([1])})
    with pytest.raises(DomainError):
        m.match_columns("A", {"x": np.array([1]), "s": np.array([3], dtype=object)})
    with pytest.raises(DomainError):
        m.match_columns("A", {"x": np.array([1.5]), "s": np.array(["a"], dtype=object)})
    objects = np.array([7, 2], dtype=object)
    csr = m.match_columns("A", {"x": objects, "s": np.array(["a", "b"], dtype=object)})
    assert csr.offsets.tolist() == [0, 1, 1]


def test_levels_merge_and_tombstones_compact() -> None:
    schema = parse_schema('[A]\nx = "int[0,999]"\n')
    m = IndexMatcher(pending_limit=0)
    ref = ReferenceMatcher()
    rnd = random.Random(7)
    evs = [Event.of(schema["A"], {"x": rnd.randrange(1000)}) for _ in range(50)]
    for i in range(300):
        p = parse_profile(f"p{i:04d}: A(x in [{rnd.randrange(900)}, {rnd.randrange(900, 1000)}])",
                          schema)
        m.add(p)
        ref.add(p)
        m.match(evs[i % 50])
        # at most FANOUT - 1 levels per size class (leveled._merge_levels)
        assert m.stats().levels <= (leveled.FANOUT - 1) * (leveled.size_class(i + 1) + 1)
    assert m.match_batch(evs) == ref.match_batch(evs)
    for i in range(0, 300, 2):
        m.remove(f"p{i:04d}")
        ref.remove(f"p{i:04d}")
    assert m.match_batch(evs) == ref.match_batch(evs)
    st_ = m.stats()
    assert st_.tombstones <= st_.profiles
    m.optimize()
    st_ = m.stats()
    assert st_.levels == 1 and st_.tombstones == 0 and st_.pending == 0
    assert m.match_batch(evs) == ref.match_batch(evs)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_large_batches_with_tombstones(threshold: float, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """Batches above GROUPED_MIN take the grouped kernel; tombstones must be honoured."""
    monkeypatch.setattr(index_module, "GROUPED_MIN_PROFILES", 0)
    rnd = random.Random(11)
    t = random_type(rnd, max_attrs=6)
    hot = _hot(rnd, t)
    m = IndexMatcher(threshold, pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(300):
        p = random_profile(rnd, t, f"p{i}", hot)
        if p is not None:
            m.add(p)
            ref.add(p)
    evs = [random_event(rnd, t, hot) for _ in range(index_module.GROUPED_MIN + 50)]
    m.match(evs[0])  # compile one level
    for pid in [p.id for p in list(ref.profiles())[::5]]:
        m.remove(pid)
        ref.remove(pid)
    assert m.stats().tombstones > 0
    assert m.match_batch(evs) == ref.match_batch(evs)
    snap = m.snapshot()
    csr = snap.match_columns(t.name, events_to_columns(t, evs))
    assert csr.rows(snap.profile_ids) == ref.match_batch(evs)


def test_many_cells_use_wide_precheck_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """More than 32767 cells: the pre-check arrays switch from int16 to int32."""
    monkeypatch.setattr(index_module, "GROUPED_MIN_PROFILES", 0)
    schema = parse_schema('[W]\na = "int[0,100000]"\nb = "int[0,9]"\n')
    etype = schema["W"]
    m = IndexMatcher(pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(17_000):
        p = Profile.build(f"p{i:05d}", etype, [Predicate("a", Op.EQ, (i * 3,)),
                                               Predicate("b", Op.LE, (i % 10,))])
        m.add(p)
        ref.add(p)
    evs = [Event.of(etype, {"a": a, "b": b}) for a, b in
           [(0, 0), (3, 9), (29_997, 5), (30_000, 9), (50_001, 0), (100_000, 9)]]
    want = ref.match_batch(evs)
    assert [m.match(e) for e in evs] == want
    snap = m.snapshot()
    ct = snap.types["W"]
    assert ct.set_ent.dtype == np.int32 and len(ct.set_kind) > 32767
    big = evs * 60  # the grouped kernel as well (GROUPED_MIN_PROFILES is 0 here)
    assert snap.match_columns("W", events_to_columns(etype, big)).rows(
        snap.profile_ids) == want * 60


@settings(max_examples=15, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from(THRESHOLDS),
       grouped=st.booleans())
@pytest.mark.usefixtures("kernels")
def test_wide_records_when_runs_do_not_fit(seed: int, threshold: float, grouped: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile with too many runs for an int16 record makes its level's records int32
    while the entries stay int16 (NARROW_RUNS lowered to 2 so that small random workloads
    take the wide layout): the same results as the reference, with interleaved add and
    remove, per event, in batches and through snapshots."""
    monkeypatch.setattr(primas, "NARROW_RUNS", 2)
    monkeypatch.setattr(index_module, "GROUPED_MIN", 1 if grouped else 10**9)
    monkeypatch.setattr(index_module, "GROUPED_MIN_PROFILES", 0)
    check_matcher(lambda: IndexMatcher(threshold, pending_limit=0), seed=seed, rounds=1,
                  profiles=60, events=15)
    schema = parse_schema('[R]\nx = "int[0,99]"\ny = "int[0,99]"\n')
    m = IndexMatcher(threshold, pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(40):
        p = parse_profile(f"p{i:02d}: R(x in {{{i}, {i + 20}, {i + 40}}}, y <= {i + 50})", schema)
        m.add(p)
        ref.add(p)
    ct = m.snapshot().types["R"]
    assert ct.rec.dtype == np.int32 and ct.set_ent.dtype == np.int16
    evs = [Event.of(schema["R"], {"x": x, "y": y}) for x in range(0, 100, 7)
           for y in (0, 60, 99)]
    assert [m.match(e) for e in evs] == ref.match_batch(evs)
    assert [ct.profile(r) for r in range(ct.n)] == sorted(ref.profiles(), key=lambda p: p.id)


def test_kernel_choice_by_batch_and_profile_count() -> None:
    assert not index_module.use_grouped(10_000, 1_000)  # few profiles: per-event kernel
    assert not index_module.use_grouped(10, 100_000)  # small batch: per-event kernel
    assert index_module.use_grouped(index_module.GROUPED_MIN,
                                    index_module.GROUPED_MIN_PROFILES)


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("engine", ["index", "counting"])
def test_many_matches_per_event_grow_the_output_buffers(
        engine: str, grouped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Far more matches per event than the kernels' first output guess (8 per event for
    the index, 4 for counting): the buffers must grow without losing or reordering any."""
    monkeypatch.setattr(index_module, "GROUPED_MIN", 1 if grouped else 10**9)
    monkeypatch.setattr(index_module, "GROUPED_MIN_PROFILES", 0)
    schema = parse_schema('[G]\na = "int[0,9]"\nb = "int[0,9]"\n')
    etype = schema["G"]
    m = make_matcher(engine)
    ref = ReferenceMatcher()
    for i in range(120):  # every event matches 60..120 of these
        p = Profile.build(f"p{i:03d}", etype, [Predicate("a", Op.LE, (9 if i % 2 else i % 10,))]
                          if i % 2 or i < 20 else [Predicate("b", Op.GE, (0,))])
        m.add(p)
        ref.add(p)
    evs = [Event.of(etype, {"a": a % 10, "b": a % 7}) for a in range(300)]
    want = ref.match_batch(evs)
    assert min(len(w) for w in want) >= 60
    assert m.match_batch(evs) == want


LONG = parse_schema('[L]\na = "int[0,3]"\nb = "int[-7,200000]"\nc = "enum[LO,MID,HI]"\n'
                    'd = "decimal[-2,2,1]"\n')["L"]


def _long_list_profile(rnd: random.Random, pid: str) -> Profile:
    """Mostly led by ``a`` (a quarter or half of its 4 keys), the rest wider, so a lead
    cell of ``a`` holds hundreds of profiles; sometimes led by a narrow ``b``."""
    lo = rnd.randint(0, 3)
    preds = [Predicate("a", Op.EQ, (lo,)) if rnd.random() < 0.7 else
             Predicate("a", Op.RANGE, (min(lo, 2), min(lo, 2) + 1))]
    r = rnd.random()
    if r < 0.4:
        preds.append(Predicate("b", Op.GE, (rnd.randint(-7, 60_000),)))
    elif r < 0.5:
        preds.append(Predicate("b", Op.RANGE, (x := rnd.randint(-7, 199_990), x + 5)))
    if rnd.random() < 0.5:
        preds.append(Predicate("c", Op.IN, tuple(rnd.sample(["LO", "MID", "HI"], 2))))
    if rnd.random() < 0.4:
        preds.append(Predicate("d", Op.LE, (rnd.choice([-2, -1, 0, 1, 2]),)))
    return Profile.build(pid, LONG, preds)


def long_list_matchers(rnd: random.Random, n: int) -> tuple[IndexMatcher, ReferenceMatcher]:
    """An index (every lead set a list, nothing pending) and the reference, both
    holding the same ``n`` long-list profiles ``p000``..."""
    m = IndexMatcher(1.0, pending_limit=0)
    ref = ReferenceMatcher()
    for i in range(n):
        p = _long_list_profile(rnd, f"p{i:03d}")
        m.add(p)
        ref.add(p)
    return m, ref


def _long_list_event(rnd: random.Random) -> Event:
    return Event.of(LONG, {
        "a": rnd.randint(0, 3),
        "b": rnd.choice([-7, 200_000, rnd.randint(-7, 200_000), rnd.randint(0, 60_000)]),
        "c": rnd.choice(["LO", "MID", "HI"]),
        "d": rnd.choice([-2, -1, 0, 1, 2, 0.5])})


@settings(max_examples=30, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(300, 1200),
       table_max=st.sampled_from([0, 4, cells_module.TABLE_MAX]),
       drop=st.floats(0.0, 0.6), prefetch=st.booleans())
@pytest.mark.usefixtures("kernels")
def test_per_event_path_on_long_lead_lists(seed: int, n: int, table_max: int,
                                           drop: float, prefetch: bool) -> None:
    """The per-event path against the reference: lead lists of hundreds of entries (the
    first pre-check runs over chunks of ``kernel_numba.CHUNK``), cells from the key ->
    cell tables or from the bounds (``TABLE_MAX`` 0: none has a table; 4: ``a`` and the
    enum; the default: all but ``b``), keys at the domains' ends, interleaved removals
    (tombstones), re-adds (pending profiles and merged levels); per event, in a batch;
    with numba kernels, with and without the id prefetch (``prefetch``: every level
    prefetches, however small)."""
    saved = cells_module.TABLE_MAX, level.PREFETCH_FROM
    cells_module.TABLE_MAX = table_max
    level.PREFETCH_FROM = 1 if prefetch else saved[1]
    try:
        rnd = random.Random(seed)
        # threshold 1: every lead set a list (at 1/32 these would be bitmaps)
        # a delta of at most 64 (n >= 300): some profiles are always in compiled levels
        m = IndexMatcher(rnd.choice([1.0, 1.0, 1 / 32]), pending_limit=rnd.choice([0, 16]),
                         delta_limit=rnd.choice([0, 64]))
        ref = ReferenceMatcher()
        profiles = [_long_list_profile(rnd, f"p{i:04d}") for i in range(n)]
        for p in profiles:
            m.add(p)
            ref.add(p)
        evs = [_long_list_event(rnd) for _ in range(12)]
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        prefetching = [lv.prefetching() for ts in m._types.values()
                       for lv in ts.levels if lv.id_list is not None]
        assert any(prefetching) == (prefetch and kernel.name() == "numba")
        for p in rnd.sample(profiles, int(drop * n)):
            m.remove(p.id)
            ref.remove(p.id)
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        for i in range(rnd.randint(0, 40)):
            p = _long_list_profile(rnd, f"q{i:03d}")
            m.add(p)
            ref.add(p)
            if i % 7 == 0:
                assert m.match(evs[i % len(evs)]) == ref.match(evs[i % len(evs)])
        want = ref.match_batch(evs)
        assert [m.match(e) for e in evs] == want
        assert m.match_batch(evs) == want
    finally:
        cells_module.TABLE_MAX, level.PREFETCH_FROM = saved


def test_per_event_runner_follows_the_kernel_choice() -> None:
    """A level's runner is specialised for the kernels in use at its first event and
    again after every change of choice (``auto`` moving from Python to numba
    included): the same matches throughout, before and after removals."""
    rnd = random.Random(5)
    m, ref = long_list_matchers(rnd, 400)
    evs = [_long_list_event(rnd) for _ in range(20)]
    try:
        for step, mode in enumerate(["python", "numba", "auto", "python", "numba"]):
            kernel.use(mode)
            assert [m.match(e) for e in evs] == ref.match_batch(evs), mode
            pid = f"p{step * 37:03d}"
            m.remove(pid)
            ref.remove(pid)
        kernel.use("auto")
        kernel.STATE.spent = kernel.AUTO_BUDGET + 1  # the next call moves to numba
        assert [m.match(e) for e in evs] == ref.match_batch(evs)
        assert kernel.name() == "numba"
    finally:
        kernel.use()
