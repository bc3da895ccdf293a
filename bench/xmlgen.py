"""Workload generators for the XML filter: EPCIS ObjectEvent messages and ADiWa subscriptions.

After the thesis's EventGenerator / SubscriptionGenerator (§6.1.2): fixed items first
(the three ObjectEvents of appendix 7; the three subscriptions of appendix 6, which a
second run re-sends and which must then be rejected as duplicates), then seeded random
ones over EPCIS fields (readPoint/id, bizLocation/id, bizStep, disposition, action,
epcList/epc, an extension temperature). Messages with more than ``per_message`` events are
split, as the thesis split at 10,000.

    python bench/xmlgen.py events --count 1000 --out events.xml
    python bench/xmlgen.py subscriptions --count 1000 --out subs.xml
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from siftbus.xmlfilter import ContentFilter, Receiver, Subscription, to_xml

EPCIS_NS = "urn:epcglobal:epcis:xsd:1"
EXT_NS = "urn:example:epcis:ext"

FIXED_EVENTS = [
    ("2010-04-12T14:04:05Z", "urn:epc:id:sgtin:1000002.1670", "OBSERVE",
     "urn:com:bizstep:receiving", "urn:com:disposition:active",
     "urn:com:readpoint:warehouse-01:entrance-01", "urn:com:location:warehouse-01"),
    ("2010-04-12T14:05:05Z", "urn:epc:id:sgtin:1000001.3246", "OBSERVE",
     "urn:com:bizstep:receiving", "urn:com:disposition:active",
     "urn:com:readpoint:area-01:entrance-01", "urn:com:location:area-01"),
    ("2010-04-12T14:06:06Z", "urn:epc:id:sgtin:1000002.1670", "OBSERVE",
     "urn:com:bizstep:producing", "urn:com:disposition:readyforproduction",
     "urn:com:readpoint:plant-01:entrance-01", "urn:com:location:plant-01"),
]

BIZSTEPS = [f"urn:epcglobal:cbv:bizstep:{s}" for s in (
    "receiving", "shipping", "picking", "packing", "loading", "unloading", "storing",
    "inspecting", "assembling", "commissioning", "decommissioning", "accepting",
    "arriving", "departing", "repairing", "replacing", "sampling", "staging",
    "transforming", "void_shipping")]
DISPOSITIONS = [f"urn:epcglobal:cbv:disp:{d}" for d in (
    "active", "in_progress", "in_transit", "damaged", "destroyed", "expired", "recalled",
    "reserved", "sellable_accessible", "stolen")]
ACTIONS = ["ADD", "OBSERVE", "DELETE"]


@dataclass(frozen=True, slots=True)
class Universe:
    """Sizes of the value pools (the automotive scenario: 60 plants, each with hundreds of
    read points and business locations; 100 supplier companies x 1,000 part types)."""

    plants: int = 60
    readers_per_plant: int = 500
    locations_per_plant: int = 200
    companies: int = 100
    items: int = 1000

    def reader(self, rnd: random.Random) -> str:
        return (f"urn:epc:id:sgln:{rnd.randrange(self.plants):07d}."
                f"{rnd.randrange(self.readers_per_plant):05d}.0")

    def location(self, rnd: random.Random) -> str:
        return (f"urn:epc:id:sgln:{rnd.randrange(self.plants):07d}."
                f"{900 + rnd.randrange(self.locations_per_plant):05d}.0")

    def epc(self, rnd: random.Random, serial: int) -> str:
        return (f"urn:epc:id:sgtin:{rnd.randrange(self.companies):07d}."
                f"{rnd.randrange(self.items):06d}.{serial}")


def _event(time: str, epcs: list[str], action: str, step: str, disp: str, rp: str, loc: str,
           temp: str | None) -> str:
    epc_xml = "".join(f"<epc>{e}</epc>" for e in epcs)
    ext = (f'<ext:temperature unit="C">{temp}</ext:temperature>' if temp is not None else "")
    return (
        "<ObjectEvent>"
        f"<eventTime>{time}</eventTime><eventTimeZoneOffset>+02:00</eventTimeZoneOffset>"
        f"<epcList>{epc_xml}</epcList><action>{action}</action><bizStep>{step}</bizStep>"
        f"<disposition>{disp}</disposition><readPoint><id>{rp}</id></readPoint>"
        f"<bizLocation><id>{loc}</id></bizLocation>{ext}"
        "</ObjectEvent>"
    )


def object_events(count: int, seed: int = 1, universe: Universe | None = None) -> list[str]:
    """``count`` ObjectEvent elements: the three fixed ones, then random numbered ones."""
    u = universe or Universe()
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        if i < len(FIXED_EVENTS):
            t, epc, a, s, d, rp, loc = FIXED_EVENTS[i]
            out.append(_event(t, [epc], a, s, d, rp, loc, None))
            continue
        epcs = [u.epc(rnd, i * 10 + k) for k in range(rnd.randint(1, 3))]
        temp = f"{rnd.uniform(-20, 40):.1f}" if rnd.random() < 0.5 else None
        out.append(_event(f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z", epcs,
                          rnd.choice(ACTIONS), rnd.choice(BIZSTEPS), rnd.choice(DISPOSITIONS),
                          u.reader(rnd), u.location(rnd), temp))
    return out


def epcis_messages(count: int, *, per_message: int = 10_000, seed: int = 1,
                   universe: Universe | None = None, workload: str = "sparse"
                   ) -> Iterator[bytes]:
    """EPCISDocuments carrying ``count`` events in total, at most ``per_message`` each
    (drawn from the universe of ``workload``, :data:`UNIVERSES`)."""
    events = object_events(count, seed, universe or UNIVERSES[workload])
    for i in range(0, len(events), per_message):
        body = "".join(events[i : i + per_message])
        yield (
            f'<epcis:EPCISDocument xmlns:epcis="{EPCIS_NS}" xmlns:ext="{EXT_NS}" '
            'schemaVersion="1.1"><EPCISHeader/><EPCISBody><EventList>'
            f"{body}</EventList></EPCISBody></epcis:EPCISDocument>"
        ).encode()


FIXED_SUBSCRIPTIONS = [
    (("HTTP", "http://localhost:4001/submit"), "//ObjectEvent", [
        ("bizLocation/id", "string-equals", ["urn:com:location:area-01"]),
        ("readPoint/id", "attribute-exists", []),
        ("bizLocation/id", "string-match", ["urn:com:*"])]),
    (("HTTPS", "http://localhost:4002/submit"), "//ObjectEvent", [
        ("bizLocation/id", "string-equals", ["urn:com:location:area-01"]),
        ("readPoint/id", "attribute-exists", [])]),
    (("HTTPS", "http://localhost:4002/submit"), "//ObjectEvent", [
        ("readPoint/id", "string-match", ["urn:com:readpoint:plant-01:*"])]),
]


def _random_filter(rnd: random.Random, u: Universe) -> ContentFilter:
    conds: list[tuple[str, str, list[str], str] | tuple[str, str, list[str]]] = []
    # one selective anchor condition, as a subscriber watching a place or a product would
    kind = rnd.random()
    if kind < 0.45:
        conds.append(("readPoint/id", "string-equals", [u.reader(rnd)]))
    elif kind < 0.7:
        conds.append(("bizLocation/id", "string-equals", [u.location(rnd)]))
    elif kind < 0.85:
        conds.append(("epcList/epc", "match-epc",
                      [f"urn:epc:idpat:sgtin:{rnd.randrange(u.companies):07d}."
                       f"{rnd.randrange(u.items):06d}.*"], "any"))
    elif kind < 0.95:
        # a group of ten readers of one plant
        group = f"{rnd.randrange(u.plants):07d}.{rnd.randrange(u.readers_per_plant) // 10:04d}"
        conds.append(("readPoint/id", "string-match", [f"urn:epc:id:sgln:{group}*"]))
    else:
        conds.append(("bizLocation/id", "string-in-set",
                      sorted({u.location(rnd) for _ in range(3)})))
    # plus zero to two broader conditions
    for _ in range(rnd.choice([0, 1, 1, 2])):
        extra = rnd.random()
        if extra < 0.3:
            conds.append(("bizStep", "string-equals", [rnd.choice(BIZSTEPS)]))
        elif extra < 0.5:
            conds.append(("action", "string-equals", [rnd.choice(ACTIONS)]))
        elif extra < 0.7:
            conds.append(("disposition", "string-in-set", rnd.sample(DISPOSITIONS, 3)))
        elif extra < 0.85:
            conds.append(("ext:temperature", rnd.choice(["numeric-gt", "numeric-lt"]),
                          [str(rnd.randrange(-10, 30))]))
        else:
            conds.append(("readPoint/id", "attribute-exists", []))
    return ContentFilter.build("//ObjectEvent", conds, namespaces={"ext": EXT_NS})


def _dense_filter(rnd: random.Random, u: Universe) -> ContentFilter:
    """Broad conditions from small pools: an event satisfies many of them, and thousands
    of filters share each one (hundreds of matches per event at 10,000)."""
    conds: list[tuple[str, str, list[str], str] | tuple[str, str, list[str]]] = []
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.random()
        if kind < 0.25:
            conds.append(("bizStep", "string-in-set", rnd.sample(BIZSTEPS, 8)))
        elif kind < 0.45:
            conds.append(("action", "string-equals", [rnd.choice(ACTIONS)]))
        elif kind < 0.65:
            conds.append(("disposition", "string-in-set", rnd.sample(DISPOSITIONS, 5)))
        elif kind < 0.8:
            conds.append(("ext:temperature", rnd.choice(["numeric-gt", "numeric-lt"]),
                          [str(rnd.randrange(-20, 40))]))
        else:
            plant = rnd.randrange(min(u.plants, 6))
            conds.append(("readPoint/id", "string-match", [f"urn:epc:id:sgln:{plant:07d}.*"]))
    return ContentFilter.build("//ObjectEvent", conds, namespaces={"ext": EXT_NS})


def _equality_filter(rnd: random.Random, u: Universe) -> ContentFilter:
    """Only ``string-equals``: one selective field and up to two broad ones."""
    conds: list[tuple[str, str, list[str]]] = [
        ("readPoint/id", "string-equals", [u.reader(rnd)]) if rnd.random() < 0.6 else
        ("bizLocation/id", "string-equals", [u.location(rnd)])]
    for _ in range(rnd.choice([0, 1, 2])):
        if rnd.random() < 0.5:
            conds.append(("bizStep", "string-equals", [rnd.choice(BIZSTEPS)]))
        else:
            conds.append(("action", "string-equals", [rnd.choice(ACTIONS)]))
    return ContentFilter.build("//ObjectEvent", conds)


def _range_filter(rnd: random.Random, u: Universe) -> ContentFilter:
    """Ranges: EPC serial ranges of the parts of a few suppliers (the interval index), and
    temperature windows with decimal bounds (two numeric comparisons)."""
    conds: list[tuple[str, str, list[str], str] | tuple[str, str, list[str]]] = []
    if rnd.random() < 0.6:
        lo = rnd.randrange(0, 200_000)
        conds.append(("epcList/epc", "match-epc",
                      [f"urn:epc:idpat:sgtin:{rnd.randrange(3):07d}.{rnd.randrange(4):06d}."
                       f"[{lo}-{lo + rnd.randrange(1, 20_000)}]"], "any"))
    if not conds or rnd.random() < 0.5:
        low = rnd.uniform(-20, 30)
        conds.append(("ext:temperature", "numeric-ge", [f"{low:.1f}"]))
        conds.append(("ext:temperature", "numeric-lt", [f"{low + rnd.uniform(1, 15):.1f}"]))
    return ContentFilter.build("//ObjectEvent", conds, namespaces={"ext": EXT_NS})


#: workload name -> filter generator; "sparse" is the thesis-like EPCIS scenario
WORKLOADS = {"sparse": _random_filter, "dense": _dense_filter, "equality": _equality_filter,
             "range": _range_filter}
#: the event universe each workload's subscriptions are drawn against (range: three
#: suppliers with four part types each, so that serial ranges meet the events' parts)
UNIVERSES = {"sparse": Universe(), "dense": Universe(), "equality": Universe(),
             "range": Universe(companies=3, items=4)}


def subscriptions(count: int, seed: int = 2, universe: Universe | None = None,
                  receivers: int | None = None, workload: str = "sparse"
                  ) -> list[Subscription]:
    """``count`` distinct subscriptions: the three fixed ones, then random ones.

    Receivers are drawn from a pool of ``receivers`` (default count // 2), so many receivers
    have several subscriptions; one in ten subscriptions has two filters (a disjunction).
    ``workload`` picks the random filters (:data:`WORKLOADS`).
    """
    u = universe or UNIVERSES[workload]
    make = WORKLOADS[workload]
    rnd = random.Random(seed)
    pool = receivers or max(1, count // 2)
    out: list[Subscription] = []
    seen: set[str] = set()
    for i, (rec, target, conds) in enumerate(FIXED_SUBSCRIPTIONS[:count]):
        s = Subscription.build(rec, [ContentFilter.build(target, conds)], id=f"fixed{i}")
        out.append(s)
        seen.add(s.digest)
    i = 0
    while len(out) < count:
        filters = [make(rnd, u) for _ in range(2 if rnd.random() < 0.1 else 1)]
        rec = Receiver("HTTP", f"http://subscriber-{rnd.randrange(pool)}.example/notify")
        s = Subscription.build(rec, filters, id=f"s{i}")
        i += 1
        if s.digest not in seen:
            seen.add(s.digest)
            out.append(s)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["events", "subscriptions"])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--per-message", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="sparse")
    ap.add_argument("--out", default="-")
    args = ap.parse_args(argv)
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")  # noqa: SIM115
    try:
        if args.what == "events":
            for msg in epcis_messages(args.count, per_message=args.per_message, seed=args.seed,
                                      workload=args.workload):
                out.write(msg + b"\n")
        else:
            out.write(to_xml(subscriptions(args.count, seed=args.seed,
                                           workload=args.workload), {"ext": EXT_NS}))
    finally:
        if out is not sys.stdout.buffer:
            out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
