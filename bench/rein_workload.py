"""REIN's interval workload (Qian et al., "Scalable and Efficient Content-based Matching",
the benchmark of REIN, TAMA, GEM, OEM...), as siftbus columns: one event type of ``dims``
int attributes on ``[0, domain)``; each subscription constrains ``preds`` distinct
attributes with ``[x, x + width * domain]``, ``x`` uniform on ``[0, domain - width *
domain]``; each event gives every attribute a uniform value. ``zipf`` draws the
subscriptions' attributes and the events' values from a Zipf hot spot instead (skew 1):
few attributes carry most conditions and values cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from siftbus.match.columns import ProfileColumns, str_array
from siftbus.model import Schema, parse_schema


@dataclass(frozen=True, slots=True)
class Rein:
    """The parameters of one REIN workload."""

    subs: int = 100_000
    dims: int = 20
    preds: int = 10
    width: float = 0.5
    domain: int = 1_000_000
    zipf: bool = False

    def schema(self) -> Schema:
        attrs = "\n".join(f"a{i} = \"int[0,{self.domain - 1}]\"" for i in range(self.dims))
        return parse_schema(f"[R]\n{attrs}\n")

    def intervals(self, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(attr[subs, preds], lo, hi)``: each subscription's attributes and bounds."""
        rng = np.random.default_rng(seed)
        if self.zipf:
            w = 1.0 / np.arange(1, self.dims + 1)
            keys = rng.random((self.subs, self.dims)) ** (1.0 / (w / w.sum() * self.dims))
        else:
            keys = rng.random((self.subs, self.dims))
        attr = np.argsort(-keys if self.zipf else keys, axis=1)[:, :self.preds]
        span = int(self.width * self.domain)
        lo = rng.integers(0, self.domain - span, size=attr.shape, endpoint=False)
        if self.zipf:  # hot spot: conditions near the low end of the domain
            lo = (rng.zipf(1.5, size=attr.shape) * (self.domain // 1000)) % (self.domain - span)
        return attr.astype(np.int64), lo.astype(np.int64), (lo + span).astype(np.int64)

    def columns(self, seed: int = 1) -> ProfileColumns:
        etype = self.schema()["R"]
        attr, lo, hi = self.intervals(seed)
        n = self.subs
        ids = str_array([f"s{i:07d}" for i in range(n)])
        by = np.argsort(attr, axis=1)
        attr = np.take_along_axis(attr, by, 1)
        lo = np.take_along_axis(lo, by, 1)
        hi = np.minimum(np.take_along_axis(hi, by, 1), self.domain - 1)
        slot = np.repeat(np.arange(n, dtype=np.int32), self.preds)
        z32 = np.zeros(0, np.int32)
        return ProfileColumns(etype, ids, np.zeros(n, np.int32), ("",), slot,
                              attr.ravel().astype(np.int16), lo.ravel(), hi.ravel(), z32,
                              np.zeros(0, np.int16), np.zeros(0, object))

    def events(self, n: int, seed: int = 2) -> np.ndarray:
        """int64 ``[n, dims]`` event values."""
        rng = np.random.default_rng(seed)
        if self.zipf:
            return (rng.zipf(1.5, size=(n, self.dims)) * (self.domain // 1000)) % self.domain
        return rng.integers(0, self.domain, size=(n, self.dims))

    def brute(self, attr: np.ndarray, lo: np.ndarray, hi: np.ndarray, event: np.ndarray
              ) -> np.ndarray:
        """Indices of the subscriptions one event matches (the plain loop, vectorised)."""
        v = event[attr]
        return np.flatnonzero(((lo <= v) & (v <= np.minimum(hi, self.domain - 1))).all(axis=1))
