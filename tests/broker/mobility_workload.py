"""Random mobility scenarios in the simulator, checked against the reference prediction.

A scenario: a random tree of brokers; static subscribers (no session) and session
subscribers with random profiles, session publishers and plain publishers at random
brokers; everything subscribed (and advertised) until quiescent -- the subscriptions are
complete before the first move, as mobility-safety presumes. Then a random sequence of
publishing, moves of session subscribers and publishers (to random brokers, back and
forth, often before the last handoff or its propagation has finished: between two
actions only a random number of messages is delivered) and partial runs. At the end the
network runs until quiet, and every client's deliveries must equal the reference: each
published event once for every profile of the client it matches -- none lost, none
twice. Finally every profile is unsubscribed, and every routing table must be empty
(the handoffs left every broker's table in step with its neighbours').
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from broker_strategies import SCHEMA, WORDS, T, U  # the same small schema
from siftbus.broker.simulator import Delivery, Simulator
from siftbus.lang.profile import format_profile
from siftbus.model import Event, IntervalSet, Profile, StringConstraint
from siftbus.model.constraint import Constraint

ROUTINGS: dict[str, dict[str, Any]] = {
    "flooding": dict(protocol="flooding"),
    "forwarding": dict(protocol="forwarding", strategy="covering"),
    "forwarding/identity": dict(protocol="forwarding", strategy="identity"),
    "forwarding/simple": dict(protocol="forwarding", strategy="simple"),
    "forwarding+advertisements": dict(protocol="forwarding", strategy="covering",
                                      advertisements=True),
    "rendezvous": dict(protocol="rendezvous", strategy="covering"),
}


def random_set(rng: random.Random, lo: int, hi: int) -> IntervalSet:
    kind = rng.choice(["eq", "range", "set"])
    if kind == "eq":
        return IntervalSet.points([rng.randint(lo, hi)])
    if kind == "range":
        a, b = sorted(rng.randint(lo, hi) for _ in range(2))
        return IntervalSet.range(a, b)
    return IntervalSet.points(rng.sample(range(lo, hi + 1), rng.randint(1, 3)))


def random_profile(rng: random.Random, pid: str) -> Profile:
    """Few attributes, small domains: many covering and equal profiles."""
    if rng.random() < 0.2:
        cons: dict[str, Constraint] = {}
        if rng.random() < 0.6:
            cons["x"] = random_set(rng, 0, 3)
        return Profile.from_constraints(pid, U, cons)
    cons = {}
    if rng.random() < 0.7:
        cons["a"] = random_set(rng, 0, 7)
    if rng.random() < 0.3:
        cons["b"] = random_set(rng, 0, 2)
    if rng.random() < 0.15:
        cons["s"] = StringConstraint.make(frozenset(rng.sample(WORDS, 2)))
    return Profile.from_constraints(pid, T, cons)


def random_event(rng: random.Random) -> Event:
    if rng.random() < 0.2:
        return Event(U, (rng.randint(0, 3),))
    return Event(T, (rng.randint(0, 7), rng.randint(0, 2), rng.choice([*WORDS, "c"])))


@dataclass
class Outcome:
    """What a scenario found."""

    lost: Counter[Delivery] = field(default_factory=Counter)
    twice: Counter[Delivery] = field(default_factory=Counter)
    extra: Counter[Delivery] = field(default_factory=Counter)
    leftover: dict[str, int] = field(default_factory=dict)
    """Routing-table entries left once every profile was unsubscribed."""
    gaps: list[Any] = field(default_factory=list)
    moves: int = 0
    published: int = 0
    log: list[str] = field(default_factory=list)
    """The scenario, step by step (a counter-example's description)."""

    @property
    def safe(self) -> bool:
        return not (self.lost or self.twice or self.extra or self.leftover or self.gaps)

    def summary(self) -> str:
        return (f"lost {sum(self.lost.values())}, twice {sum(self.twice.values())}, "
                f"unexpected {sum(self.extra.values())}, leftover {self.leftover}, "
                f"gaps {self.gaps}")


def run_mobility(rng: random.Random, handoff: str, routing: str, *, min_brokers: int = 2,
                 max_brokers: int = 12, actions: int = 40, publishers_move: bool = True,
                 tell: float = 0.9, inspect: Any = None, settle: bool = False,
                 check: Any = None, fresh: float = 0.0, late: float = 0.0,
                 max_steps: int = 10_000_000) -> Outcome:
    """One random scenario (see the module docstring); ``tell``: the chance that a moving
    client names its last broker (else the new broker locates the session); ``fresh``:
    the chance that such an untold move is a new process knowing only the session id
    and its last number (its broker finds the session before the ACK; meanwhile it
    cannot publish, and a move is a fresh process again); ``max_steps``: messages
    delivered in one run to quiet before it counts as a loop (``RuntimeError``); ``late``:
    the chance that a moving client's old broker reads its closed connection to the end
    only later, among the other messages (as real sockets may: ``Simulator.disconnect``)."""
    out = Outcome()
    n = rng.randint(min_brokers, max_brokers)
    names = [f"B{i}" for i in range(n)]
    edges = [(names[rng.randint(0, i - 1)], names[i]) for i in range(1, n)]
    config = dict(ROUTINGS[routing])
    if config["protocol"] == "rendezvous":
        config["rendezvous"] = {t: rng.choice(names) for t in SCHEMA.names}
    sim = Simulator(SCHEMA, names, edges, handoff=handoff, seed=rng.randrange(2**31),
                    **config)
    out.log.append(f"tree {edges} routing {routing} handoff {handoff} "
                   f"rendezvous {config.get('rendezvous')}")
    movers: list[str] = []
    session_pubs: list[str] = []
    pubs: list[str] = []
    profiles: dict[str, dict[str, Profile]] = {}
    for i in range(rng.randint(1, 3)):
        name = f"m{i}"
        sim.add_client(name, rng.choice(names), session=True)
        movers.append(name)
    for i in range(rng.randint(0, 3)):
        sim.add_client(f"s{i}", rng.choice(names))
        profiles[f"s{i}"] = {}
    for i in range(rng.randint(1, 2)):
        name = f"q{i}"
        sim.add_client(name, rng.choice(names), session=True)
        session_pubs.append(name)
    for i in range(rng.randint(0, 1)):
        sim.add_client(f"p{i}", rng.choice(names))
        pubs.append(f"p{i}")
    sim.run()
    for name in movers + [c for c in profiles if c not in movers]:
        ps = [random_profile(rng, f"f{k}") for k in range(rng.randint(1, 3))]
        profiles[name] = {p.id: p for p in ps}
        sim.subscribe(name, ps)
        out.log.append(f"{name} at {sim.clients[name].broker} subscribes "
                       + "; ".join(format_profile(p) for p in ps))
    if config.get("advertisements"):
        for name in session_pubs + pubs:
            adverts = [Profile.from_constraints("all-T", T, {}),
                       Profile.from_constraints("all-U", U, {})]
            sim.advertise(name, adverts)
    sim.run()
    published: list[tuple[tuple[str, int], Event]] = []
    last: dict[str, str] = {}
    for _ in range(actions):
        r = rng.random()
        if r < 0.45:
            who = rng.choice(session_pubs + pubs)
            evs = [random_event(rng) for _ in range(rng.randint(1, 3))]
            if sim.clients[who].pending:  # a fresh process not answered yet: it waits
                out.log.append(f"{who} waits for its ACK at {sim.clients[who].broker}")
            else:
                ids = sim.publish(who, evs)
                published += list(zip(ids, evs, strict=True))
                out.log.append(f"{who} at {sim.clients[who].broker} publishes {ids}")
        elif r < 0.8 or (r < 0.9 and publishers_move):
            pool = movers if r < 0.8 else session_pubs
            who = rng.choice(pool)
            here = sim.clients[who].broker
            to = last.get(who, here) if rng.random() < 0.3 else rng.choice(names)
            last[who] = here
            told = rng.random() < tell
            new = not told and fresh > 0 and rng.random() < fresh
            slow = late > 0 and rng.random() < late  # drawn only then: seeds keep their runs
            ok = sim.move(who, to, tell=told, fresh=new, late=slow)
            out.moves += 1
            out.log.append(f"{who} moves {here} -> {to}{'' if told else ' (untold)'}"
                           f"{' (fresh process)' if new else ''}"
                           f"{' (its old connection read late)' if slow else ''}"
                           f"{'' if ok else ' (refused: busy)'}")
        for _ in range(rng.randint(0, 60)):
            if not sim.step():
                break
        if settle:
            sim.run(max_steps)
        if check is not None:
            check(sim, out)
    sim.run(max_steps)
    for c in sim.clients.values():
        if c.session and not c.connected:
            # refused while its state was still arriving (SessionBusy): the client
            # library connects again, as the error says; here, once all is quiet
            sim.add_client(c.name, c.broker, session=True)
            out.log.append(f"{c.name} connects again at {c.broker}")
    sim.run()
    sim.advance(1.0)
    out.published = len(published)
    want: Counter[Delivery] = Counter()
    for ident, ev in published:
        for client, ps in profiles.items():
            for p in ps.values():
                if p.matches(ev):
                    want[Delivery(client, p.id, ident)] += 1
    got = Counter(sim.deliveries())
    out.lost = want - got
    out.extra = Counter({d: k for d, k in (got - want).items() if d not in want})
    out.twice = Counter({d: k for d, k in (got - want).items() if d in want})
    out.gaps = [(c.name, c.gaps) for c in sim.clients.values() if c.gaps]
    if inspect is not None:
        inspect(sim)
    for client, ps in profiles.items():
        if ps:
            sim.unsubscribe(client, list(ps))
    for name in session_pubs + pubs:
        if config.get("advertisements"):
            sim.unadvertise(name, ["all-T", "all-U"])
    sim.run()
    out.leftover = {b: k for b, k in sim.table_sizes().items() if k}
    return out


def mirror_errors(sim: Simulator) -> list[str]:
    """Where a broker's table disagrees with what its neighbour exports to it (the
    forwarding invariant; meaningful when the network is quiet)."""
    errs = []
    for a, b in sim.edges:
        for u, v in ((a, b), (b, a)):
            sent = {p.id for p in sim.nodes[u].routing.table.exported(v)}
            held = {e.id for e in sim.nodes[v].routing.table.entries.values() if e.src == u}
            if sent != held:
                errs.append(f"{u}->{v}: exported-not-held {sorted(sent - held)} "
                            f"held-not-exported {sorted(held - sent)}")
    return errs


__all__ = ["ROUTINGS", "mirror_errors", "SCHEMA", "Outcome", "random_event", "random_profile",
           "run_mobility"]
