"""Temporal subspace matching (Tarkoma 2006, ch. 6-7): persistent notifications that are
subspaces valid for a period, filters with three semantics, the DoubleForest that
matches them in both directions, and preloading for constant-time lookups.

* :mod:`~siftbus.temporal.notification`: :class:`Validity`, :class:`Semantics`,
  :class:`PersistentNotification`, :class:`TemporalFilter`, :class:`Change`;
* :mod:`~siftbus.temporal.forest`: one covering-ordered forest of subspaces with
  overlap / covering / covered queries and bound-based pruning
  (:mod:`~siftbus.temporal.hulls`: the vectorised bounds);
* :mod:`~siftbus.temporal.preload`: precomputed result sets per cell of small domains;
* :mod:`~siftbus.temporal.store`: one side (forest + preload tables, ids to slots);
* :mod:`~siftbus.temporal.double`: :class:`DoubleForest`, both sides and time;
* :mod:`~siftbus.temporal.reference`: the brute-force oracle;
* :mod:`~siftbus.temporal.collection`: a subscriber's collections, kept in step;
* :mod:`~siftbus.temporal.text`: persistent notifications as JSON lines.
"""

from siftbus.temporal.collection import Collection, Collections
from siftbus.temporal.double import DoubleForest
from siftbus.temporal.forest import SubspaceForest
from siftbus.temporal.notification import (
    ALWAYS,
    FOREVER,
    Change,
    ChangeKind,
    PersistentNotification,
    Reason,
    Semantics,
    TemporalFilter,
    Validity,
)
from siftbus.temporal.preload import NO_PRELOAD, PreloadPolicy
from siftbus.temporal.reference import ReferenceTemporal
from siftbus.temporal.store import Selection, SubspaceStore

__all__ = [
    "ALWAYS",
    "FOREVER",
    "NO_PRELOAD",
    "Change",
    "ChangeKind",
    "Collection",
    "Collections",
    "DoubleForest",
    "PersistentNotification",
    "PreloadPolicy",
    "Reason",
    "ReferenceTemporal",
    "Selection",
    "Semantics",
    "SubspaceForest",
    "SubspaceStore",
    "TemporalFilter",
    "Validity",
]
