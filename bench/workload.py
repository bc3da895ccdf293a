"""Seeded workload generators for the matcher benchmark (and anyone else who needs load).

Standard workload (issue 4): event types with 10 integer attributes ``i0..i9`` (domain
0..999) and 2 enum attributes ``e0``, ``e1`` (5 labels each); profiles with 1 to 5
conditions (=, <, >, range, set), operand positions uniform or Zipf. Each profile aims
at a match probability ``q = target_matches / n_profiles``: ``log q`` is split at random
(Dirichlet) over its conditions, so a profile usually has one sharp condition and a few
broad ones, as real subscriptions do ("sensor = 12 and value > 20"). One-condition
profiles can be no sharper than ``= v`` (1/1000), so their share shrinks as the profile
count grows; that keeps matches per event similar at every scale, which is what the
sublinearity target compares. :func:`expected_matches` computes the exact expectation
for uniform events.

Building-automation workload: Bittner's use case (report §5): temperature, brightness,
motion, glass-break, window, lamp, button, sun and outdoor-temperature events with
heater, blind, light, janitor, security and HVAC profiles.

Run ``python bench/workload.py --profiles 100000`` to print the expected and measured
matches per event.
"""

from __future__ import annotations

import argparse
import math
import random
from bisect import bisect_left
from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from siftbus.model import (
    Condition,
    Event,
    EventType,
    IntervalSet,
    Profile,
    Schema,
    StringConstraint,
    parse_schema,
)
from siftbus.spark.workload import DOMAIN, ENUM_LABELS, standard_schema_toml


def standard_schema(n_types: int = 1) -> Schema:
    """``n_types`` types ``S0..``: ``i0..i9`` int[0,999] and ``e0, e1`` enum[A..E]."""
    return parse_schema(standard_schema_toml(n_types))


class _Zipf:
    """Zipf(s) over 0..n-1 mapped through a fixed random permutation (hot keys spread)."""

    def __init__(self, rnd: random.Random, n: int, s: float = 1.1) -> None:
        w = 1.0 / np.arange(1, n + 1) ** s
        self.cdf = np.cumsum(w / w.sum())
        self.cdf_list = self.cdf.tolist()
        perm = list(range(n))
        rnd.shuffle(perm)
        self.perm = np.array(perm, np.int64)
        self.perm_list = perm

    def one(self, rnd: random.Random) -> int:
        i = bisect_left(self.cdf_list, rnd.random())
        return self.perm_list[min(i, len(self.perm_list) - 1)]

    def draw(self, rnd: np.random.Generator, size: int) -> np.ndarray:
        ranks = np.minimum(np.searchsorted(self.cdf, rnd.random(size)), len(self.cdf) - 1)
        return self.perm[ranks]


def standard_profiles(n: int, *, seed: int = 1, values: str = "uniform",
                      target_matches: float = 5.0, schema: Schema | None = None,
                      id_prefix: str = "p") -> list[Profile]:
    """``n`` profiles over the types of ``schema`` (default: one standard type)."""
    if values not in ("uniform", "zipf"):
        raise ValueError("values must be 'uniform' or 'zipf'")
    schema = schema or standard_schema()
    types = list(schema)
    rnd = random.Random(seed)
    zipfs = [_Zipf(rnd, DOMAIN) for _ in range(10)] if values == "zipf" else None
    q = min(0.5, target_matches / max(n, 1))
    # One-condition profiles match with probability >= 1/1000 each: allow about one match
    # per event from them, whatever n.
    p_single = min(0.2, 1.0 / max(1.0, n / 1000))
    width = len(str(max(n - 1, 1)))
    out: list[Profile] = []
    int_names = [f"i{j}" for j in range(10)]
    interned: dict[tuple[str, str, IntervalSet], Condition] = {}
    for idx in range(n):
        etype = types[idx % len(types)]
        k = 1 if rnd.random() < p_single else rnd.randint(2, 5)
        # Enum conditions accept at least 1/5 of events: only in profiles with room for them.
        attrs = rnd.sample(range(12 if k >= 3 else 10), k)
        cons: dict[str, IntervalSet] = {}
        budget = math.log(q)
        ints = [a for a in attrs if a < 10]
        for a in attrs:
            if a >= 10:  # enum conditions are coarse: take what they give
                c = _enum_constraint(rnd, math.exp(budget / k))
                cons[f"e{a - 10}"] = c
                budget -= math.log(c.size / len(ENUM_LABELS))
        if ints:
            for a, s in zip(ints, _split(rnd, min(0.0, budget), len(ints)), strict=True):
                cons[int_names[a]] = _int_constraint(rnd, s,
                                                     zipfs[a] if zipfs is not None else None)
        conds = tuple(_intern_condition(etype, name, c, interned) for name, c in
                      sorted(cons.items(), key=lambda kv: etype.attribute(kv[0]).position))
        out.append(Profile(f"{id_prefix}{idx:0{width}d}", etype, conds))
    return out


def _intern_condition(etype: EventType, name: str, c: IntervalSet,
                      interned: dict[tuple[str, str, IntervalSet], Condition]) -> Condition:
    """One shared Condition object per distinct condition: a million profiles then cost
    what their ids and tuples cost, not a million copies of the same intervals."""
    key = (etype.name, name, c)
    cond = interned.get(key)
    if cond is None:
        cond = interned[key] = Condition(name, etype.attribute(name).position, c)
    return cond


def _split(rnd: random.Random, log_q: float, k: int) -> list[float]:
    """Selectivities of ``k`` conditions whose product is about ``exp(log_q)``: a random
    (Dirichlet) split, each clipped to [1/1000, 1], the shortfall moved to the others."""
    raw = [rnd.expovariate(1.0) for _ in range(k)]
    total = sum(raw)
    logs = [log_q * r / total for r in raw]
    floor = math.log(1 / DOMAIN)
    for _ in range(k):
        low = [i for i, v in enumerate(logs) if v < floor]
        if not low:
            break
        excess = sum(logs[i] - floor for i in low)
        for i in low:
            logs[i] = floor
        free = [i for i, v in enumerate(logs) if v > floor]
        if not free:
            break
        for i in free:
            logs[i] += excess / len(free)
    return [math.exp(max(v, floor)) for v in logs]


def _int_constraint(rnd: random.Random, s: float, z: _Zipf | None) -> IntervalSet:
    """A condition accepting about ``s * 1000`` keys of 0..999."""
    w = int(min(DOMAIN - 1, max(1, round(s * DOMAIN))))

    def pos() -> int:
        return z.one(rnd) if z is not None else rnd.randrange(DOMAIN)

    if w == 1:
        v = pos()
        return IntervalSet(((v, v),))
    kind = rnd.randrange(4)
    if kind == 0:  # a < w
        return IntervalSet(((0, w - 1),))
    if kind == 1:  # a > 999 - w
        return IntervalSet(((DOMAIN - w, DOMAIN - 1),))
    if kind == 2 or w > 8:  # range
        lo = min(pos(), DOMAIN - w)
        return IntervalSet(((lo, lo + w - 1),))
    return IntervalSet.points(pos() for _ in range(w))  # set (may collapse duplicates)


def _enum_constraint(rnd: random.Random, s: float) -> IntervalSet:
    w = int(min(4, max(1, round(s * len(ENUM_LABELS)))))
    kind = rnd.randrange(3)
    if kind == 0:
        return IntervalSet.range(0, w - 1)
    if kind == 1:
        return IntervalSet.range(len(ENUM_LABELS) - w, len(ENUM_LABELS) - 1)
    lo = rnd.randint(0, len(ENUM_LABELS) - w)
    return IntervalSet.range(lo, lo + w - 1)


def standard_event_keys(n: int, *, seed: int = 2, values: str = "uniform",
                        profile_seed: int = 1) -> np.ndarray:
    """int64 ``[n, 12]`` keys in schema order (i0..i9, e0, e1).

    With ``values="zipf"`` the integer keys follow the same hot spots as the profiles
    generated with ``profile_seed`` (the permutations are drawn from it first).
    """
    rnd = np.random.default_rng(seed)
    keys = np.empty((n, 12), np.int64)
    if values == "zipf":
        prnd = random.Random(profile_seed)
        zipfs = [_Zipf(prnd, DOMAIN) for _ in range(10)]
        for j, z in enumerate(zipfs):
            keys[:, j] = z.draw(rnd, n)
    else:
        keys[:, :10] = rnd.integers(0, DOMAIN, (n, 10))
    keys[:, 10:] = rnd.integers(0, len(ENUM_LABELS), (n, 2))
    return keys


def standard_events(n: int, *, seed: int = 2, values: str = "uniform",
                    schema: Schema | None = None, profile_seed: int = 1) -> list[Event]:
    """``n`` events of the first standard type (keys from :func:`standard_event_keys`)."""
    etype = (schema or standard_schema()).types[0]
    keys = standard_event_keys(n, seed=seed, values=values, profile_seed=profile_seed)
    return [Event(etype, tuple(row)) for row in keys.tolist()]


def columns_of(etype: EventType, keys: np.ndarray) -> dict[str, np.ndarray]:
    """Columnar events (attribute -> int64 keys) from a key matrix in schema order."""
    return {a.name: np.ascontiguousarray(keys[:, a.position]) for a in etype.attributes}


def expected_matches(profiles: Sequence[Profile]) -> float:
    """Exact expected matches per event for uniform, independent event keys."""
    total = 0.0
    for p in profiles:
        prob = 1.0
        for c in p.conditions:
            d = p.etype.attribute(c.attr).domain
            assert isinstance(c.constraint, IntervalSet)
            prob *= c.constraint.size / (d.max_key - d.min_key + 1)  # type: ignore[union-attr]
        total += prob
    return total


# -- building automation (Bittner §1.1, §6.9; report §5) -----------------------------

BUILDING_SCHEMA = """\
[Temperature]
sensor = "int[1,400]"
room = "int[1,300]"
value = "decimal[-40,60,1]"

[Brightness]
sensor = "int[1,400]"
room = "int[1,300]"
lux = "int[0,100000]"

[Motion]
sensor = "int[1,400]"
room = "int[1,300]"
present = "int[0,1]"

[GlassBreak]
sensor = "int[1,400]"
room = "int[1,300]"
level = "int[0,10]"

[WindowContact]
room = "int[1,300]"
open = "int[0,1]"

[LampStatus]
lamp = "int[1,2000]"
room = "int[1,300]"
state = "enum[OK,DEGRADED,FAILED]"

[Button]
switch = "int[1,600]"
room = "int[1,300]"
action = "enum[PRESS,HOLD,RELEASE]"

[Sun]
facade = "enum[N,E,S,W]"
irradiance = "int[0,1200]"

[OutdoorTemp]
value = "int[-40,60]"

[Alarm]
zone = "string"
message = "string"
"""


def building_schema() -> Schema:
    return parse_schema(BUILDING_SCHEMA)


def building_profiles(n: int, *, seed: int = 3) -> list[Profile]:
    """Heaters, blinds, lights, janitor, security and HVAC subscriptions for 300 rooms."""
    schema = building_schema()
    rnd = random.Random(seed)
    out: list[Profile] = []
    width = len(str(max(n - 1, 1)))

    def iv(lo: int, hi: int) -> IntervalSet:
        return IntervalSet.range(lo, hi)

    for i in range(n):
        pid = f"b{i:0{width}d}"
        room = rnd.randint(1, 300)
        kind = rnd.random()
        if kind < 0.25:  # heater: per-room temperature threshold
            w = rnd.randint(180, 240)  # 18.0 .. 24.0 degrees
            t = schema["Temperature"]
            out.append(Profile.from_constraints(pid, t, {"room": iv(room, room),
                                                         "value": iv(w + 1, 600)},
                                                f"heater-{room}"))
        elif kind < 0.35:  # heater: shared outdoor sensor, heavy covering
            out.append(Profile.from_constraints(pid, schema["OutdoorTemp"],
                                                {"value": iv(rnd.choice([18, 20, 22]) + 1, 60)},
                                                f"heater-{room}"))
        elif kind < 0.5:  # lights: dark room
            out.append(Profile.from_constraints(pid, schema["Brightness"],
                                                {"room": iv(room, room),
                                                 "lux": iv(0, rnd.choice([300, 500]) - 1)},
                                                f"light-{room}"))
        elif kind < 0.62:  # lights: button
            out.append(Profile.from_constraints(pid, schema["Button"], {"room": iv(room, room)},
                                                f"light-{room}"))
        elif kind < 0.72:  # blinds: sunny facade
            facade = rnd.randrange(4)
            out.append(Profile.from_constraints(pid, schema["Sun"],
                                                {"facade": iv(facade, facade),
                                                 "irradiance": iv(601, 1200)},
                                                f"blind-{room}"))
        elif kind < 0.8:  # janitor: failed lamps on a floor (rooms of 30 per floor)
            floor = (room - 1) // 30
            out.append(Profile.from_constraints(pid, schema["LampStatus"],
                                                {"state": iv(2, 2),
                                                 "room": iv(floor * 30 + 1, floor * 30 + 30)},
                                                "janitor"))
        elif kind < 0.88:  # security: glass breakage
            out.append(Profile.from_constraints(pid, schema["GlassBreak"],
                                                {"level": iv(rnd.randint(5, 7) + 1, 10)},
                                                "security"))
        elif kind < 0.96:  # HVAC: open windows
            out.append(Profile.from_constraints(pid, schema["WindowContact"],
                                                {"room": iv(room, room), "open": iv(1, 1)},
                                                f"hvac-{room}"))
        else:  # operators: alarms of a zone
            zone = f"floor-{(room - 1) // 30}"
            out.append(Profile.from_constraints(
                pid, schema["Alarm"], {"zone": StringConstraint.make(None, zone)},
                "operator"))
    return out


def building_events(n: int, *, seed: int = 4) -> list[Event]:
    """Periodic sensor reports (most events) and rarer switches, lamps and alarms."""
    schema = building_schema()
    rnd = random.Random(seed)
    out: list[Event] = []
    for _ in range(n):
        r = rnd.random()
        room = rnd.randint(1, 300)
        if r < 0.4:
            out.append(Event.of(schema["Temperature"], {
                "sensor": rnd.randint(1, 400), "room": room,
                "value": Decimal(rnd.randint(150, 280)) / 10}))
        elif r < 0.6:
            out.append(Event.of(schema["Brightness"], {
                "sensor": rnd.randint(1, 400), "room": room, "lux": rnd.randint(0, 2000)}))
        elif r < 0.7:
            out.append(Event.of(schema["Motion"], {
                "sensor": rnd.randint(1, 400), "room": room, "present": rnd.randint(0, 1)}))
        elif r < 0.75:
            out.append(Event.of(schema["OutdoorTemp"], {"value": rnd.randint(-10, 35)}))
        elif r < 0.82:
            out.append(Event.of(schema["Sun"], {"facade": rnd.choice("NESW"),
                                                "irradiance": rnd.randint(0, 1200)}))
        elif r < 0.88:
            out.append(Event.of(schema["Button"], {"switch": rnd.randint(1, 600), "room": room,
                                                   "action": rnd.choice(["PRESS", "HOLD",
                                                                         "RELEASE"])}))
        elif r < 0.93:
            out.append(Event.of(schema["WindowContact"], {"room": room,
                                                          "open": rnd.randint(0, 1)}))
        elif r < 0.97:
            out.append(Event.of(schema["LampStatus"], {
                "lamp": rnd.randint(1, 2000), "room": room,
                "state": rnd.choice(["OK", "OK", "OK", "DEGRADED", "FAILED"])}))
        elif r < 0.99:
            out.append(Event.of(schema["GlassBreak"], {
                "sensor": rnd.randint(1, 400), "room": room, "level": rnd.randint(0, 10)}))
        else:
            out.append(Event.of(schema["Alarm"], {"zone": f"floor-{(room - 1) // 30}",
                                                  "message": "smoke"}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--values", choices=["uniform", "zipf"], default="uniform")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from siftbus.match.index import IndexMatcher

    profiles = standard_profiles(args.profiles, seed=args.seed, values=args.values)
    m = IndexMatcher()
    for p in profiles:
        m.add(p)
    evs = standard_events(args.events, values=args.values, profile_seed=args.seed)
    counts = [len(x) for x in m.match_batch(evs)]
    print(f"profiles={args.profiles} values={args.values} "
          f"expected(uniform)={expected_matches(profiles):.2f} "
          f"measured mean={np.mean(counts):.2f} median={np.median(counts):.0f} "
          f"max={max(counts)}")


if __name__ == "__main__":
    main()
