"""Covering, overlap and merging of profiles, and THE forwarding algorithm built on them.

* :mod:`~siftbus.covering.relations`: ``covers``, ``equivalent``, ``overlaps``,
  ``relation`` and ``merge`` (perfect, or imperfect on request) on two profiles;
* :mod:`~siftbus.covering.query`: covering queries on a large profile set;
* :mod:`~siftbus.covering.table`: entries, filter nodes and the router queries every
  structure shares; :mod:`~siftbus.covering.poset`: Siena's filters poset;
  :mod:`~siftbus.covering.forest`: the poset-derived forest;
  :mod:`~siftbus.covering.flat`: nodes without covering (strategies simple, identity);
* :mod:`~siftbus.covering.forwarding`: the forwarding table every broker routes with
  (per-neighbour updates), with :mod:`~siftbus.covering.merging` for merging;
* :mod:`~siftbus.covering.export`: JSON and Graphviz DOT dumps of a structure.
"""

from siftbus.covering.flat import FlatTable
from siftbus.covering.forest import PosetForest
from siftbus.covering.forwarding import STRATEGIES, ForwardingTable, Update
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
from siftbus.covering.table import CoveringTable, Entry, FilterNode

__all__ = [
    "STRATEGIES",
    "CoveringIndex",
    "CoveringTable",
    "Entry",
    "FilterNode",
    "FilterPoset",
    "FlatTable",
    "ForwardingTable",
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
