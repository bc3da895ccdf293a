"""A small schema, every event of it, and random profiles on few values of small domains
(so covering chains are common), for the covering tables and forwarding tests."""

from __future__ import annotations

import itertools
import random

from siftbus.model import Event, Op, Predicate, Profile, parse_schema

SCHEMA = parse_schema('[T]\na = "int[0,5]"\nb = "int[0,3]"\nc = "enum[L0,L1,L2]"\n'
                      's = "string"\n[V]\nx = "int[0,2]"\n')
T = SCHEMA["T"]
STRINGS = ["", "a", "ab", "abc", "b"]
EVENTS = [Event.of(T, {"a": a, "b": b, "c": c, "s": s})
          for a, b, c, s in itertools.product(range(6), range(4), ["L0", "L1", "L2"], STRINGS)]
EVENTS += [Event.of(SCHEMA["V"], {"x": x}) for x in range(3)]


def random_profile(rng: random.Random, pid: str) -> Profile:
    """Conditions on few values of small domains, so covering chains are common."""
    if rng.random() < 0.08:
        return Profile.build(pid, SCHEMA["V"], [Predicate("x", Op.LE, (rng.randrange(3),))])
    preds = []
    for attr, top in (("a", 5), ("b", 3)):
        if rng.random() < 0.6:
            lo = rng.randint(0, top)
            hi = rng.randint(lo, top)
            kind = rng.randrange(5)
            if kind == 0:
                preds.append(Predicate(attr, Op.RANGE, (lo, hi)))
            elif kind == 1:
                preds.append(Predicate(attr, Op.LE, (hi,)))
            elif kind == 2:
                preds.append(Predicate(attr, Op.GE, (lo,)))
            elif kind == 3:
                preds.append(Predicate(attr, Op.NE, (lo,)))
            else:
                preds.append(Predicate(attr, Op.IN, tuple(rng.sample(range(top + 1), 2))))
    if rng.random() < 0.3:
        preds.append(Predicate("c", Op.IN, tuple(rng.sample(["L0", "L1", "L2"], 2))))
    if rng.random() < 0.25:
        preds.append(rng.choice([
            Predicate("s", Op.PREFIX, (rng.choice(["a", "ab"]),)),
            Predicate("s", Op.EQ, (rng.choice(STRINGS),)),
            Predicate("s", Op.NE, (rng.choice(STRINGS),)),
            Predicate("s", Op.IN, tuple(rng.sample(STRINGS, 2)))]))
    return Profile.build(pid, T, preds)
