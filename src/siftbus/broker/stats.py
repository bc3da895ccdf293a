"""Broker instrumentation: counters while running, frozen snapshots for reports."""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

LATENCY_BOUNDS_MS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
"""Upper bounds (milliseconds) of the latency histogram's buckets; one more for the rest."""

_BOUNDS = np.array(LATENCY_BOUNDS_MS)


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Traffic on one link of a broker."""

    messages_in: int
    """Frames received on the link."""
    messages_out: int
    """Frames sent on the link."""
    bytes_in: int
    """Bytes received (frames with their length prefix)."""
    bytes_out: int
    """Bytes sent."""


@dataclass(frozen=True, slots=True)
class BrokerStats:
    """A snapshot of one broker's counters."""

    name: str
    """The broker."""
    protocol: str
    """Its routing protocol."""
    events_in: int
    """Events received from clients and brokers (each event of a batch counts)."""
    events_published: int
    """Events received from local publishers."""
    events_out: int
    """Events sent to neighbour brokers (once per link)."""
    filter_ops: int
    """Events matched against the profile table."""
    matches: int
    """(profile, event) matches found, including those for neighbour brokers."""
    notifications: int
    """(profile, event) notifications handed to local clients."""
    dropped: int
    """Notifications for clients that were offline (durable subscriptions) or too slow."""
    table_size: int
    """Entries in the profile table (local and neighbours' profiles)."""
    local_profiles: int
    """Entries from local clients."""
    exported: int
    """Profiles this broker holds at its neighbours."""
    adverts: int
    """Advertisements stored."""
    covering_tests: int
    """Covering tests made while forwarding profiles."""
    clients: int
    """Clients connected now."""
    neighbours_up: int
    """Neighbour brokers connected now."""
    messages_in: int
    """Frames received from brokers."""
    messages_out: int
    """Frames sent to brokers."""
    bytes_in: int
    """Bytes received from brokers."""
    bytes_out: int
    """Bytes sent to brokers."""
    latency_ms: dict[str, int]
    """Histogram of publish-to-notify latency at this broker: bucket upper bound -> count."""
    links: dict[str, LinkStats]
    """Per-link traffic."""
    denials: dict[str, int] = field(default_factory=dict)
    """Security denials by ``kind/action`` (``authentication/connect``,
    ``access/subscribe``, ``quota/publish``, ...); empty on an open network."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BrokerStats:
        data = dict(d)
        data["links"] = {k: LinkStats(**v) for k, v in d["links"].items()}
        return cls(**data)

    def latency_quantile(self, q: float) -> float | None:
        """The bucket bound below which a fraction ``q`` of latencies lie, or ``None``."""
        return histogram_quantile(self.latency_ms, q)


def histogram_quantile(hist: dict[str, int], q: float) -> float | None:
    total = sum(hist.values())
    if not total:
        return None
    need = q * total
    acc = 0
    for bound, n in hist.items():
        acc += n
        if acc >= need:
            return float("inf") if bound == "inf" else float(bound)
    return float("inf")


@dataclass(slots=True)
class _Link:
    messages_in: int = 0
    messages_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(slots=True)
class Counters:
    """Mutable counters a broker updates while it runs."""

    events_in: int = 0
    events_published: int = 0
    events_out: int = 0
    filter_ops: int = 0
    matches: int = 0
    notifications: int = 0
    dropped: int = 0
    links: dict[str, _Link] = field(default_factory=dict)
    latency: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))

    def link(self, name: str) -> _Link:
        lk = self.links.get(name)
        if lk is None:
            lk = self.links[name] = _Link()
        return lk

    def count_in(self, link: str, nbytes: int) -> None:
        lk = self.link(link)
        lk.messages_in += 1
        lk.bytes_in += nbytes

    def count_out(self, link: str, nbytes: int) -> None:
        lk = self.link(link)
        lk.messages_out += 1
        lk.bytes_out += nbytes

    def observe_latency(self, seconds: float, n: int = 1) -> None:
        i = bisect.bisect_left(LATENCY_BOUNDS_MS, seconds * 1000.0)
        self.latency[i] += n

    def observe_latencies(self, seconds: np.ndarray, weights: np.ndarray) -> None:
        """Count ``weights[i]`` latencies of ``seconds[i]`` each (negative ones as 0)."""
        if not len(seconds):
            return
        idx = np.searchsorted(_BOUNDS, np.maximum(seconds, 0.0) * 1000.0, side="left")
        hist = np.bincount(idx, weights=weights, minlength=len(self.latency))
        for i, v in enumerate(hist.tolist()):
            if v:
                self.latency[i] += int(v)

    def latency_dict(self) -> dict[str, int]:
        keys = [f"{b:g}" for b in LATENCY_BOUNDS_MS] + ["inf"]
        return dict(zip(keys, self.latency, strict=True))


__all__ = ["LATENCY_BOUNDS_MS", "BrokerStats", "Counters", "LinkStats", "histogram_quantile"]
