"""Covering, overlap and merging of profiles, and the routing tables built on them.

* :mod:`~siftbus.covering.relations`: ``covers``, ``equivalent``, ``overlaps``,
  ``relation`` and ``merge`` (perfect, or imperfect on request) on two profiles;
* :mod:`~siftbus.covering.query`: covering queries on a large profile set;
* :mod:`~siftbus.covering.poset`: Siena's filters poset;
* :mod:`~siftbus.covering.forest`: the poset-derived forest;
* :mod:`~siftbus.covering.routing`: per-neighbour forwarding updates on either table;
* :mod:`~siftbus.covering.export`: JSON and Graphviz DOT dumps of either.
"""

from siftbus.covering.forest import PosetForest
from siftbus.covering.poset import FilterPoset
from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import (
    Relation,
    covers,
    equivalent,
    merge,
    merge_set,
    overlaps,
    relation,
)
from siftbus.covering.routing import Forwarder, Update
from siftbus.covering.table import CoveringTable, FilterNode

__all__ = [
    "CoveringIndex",
    "CoveringTable",
    "FilterNode",
    "FilterPoset",
    "Forwarder",
    "PosetForest",
    "Relation",
    "Update",
    "covers",
    "equivalent",
    "merge",
    "merge_set",
    "overlaps",
    "relation",
]
