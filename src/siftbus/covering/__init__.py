"""Covering, overlap and merging of profiles, and the routing tables built on them.

* :mod:`~siftbus.covering.relations`: ``covers``, ``equivalent``, ``overlaps``,
  ``relation`` and ``merge`` (perfect, or imperfect on request) on two profiles;
* :mod:`~siftbus.covering.query`: covering queries on a large profile set;
* :mod:`~siftbus.covering.poset`: Siena's filters poset;
* :mod:`~siftbus.covering.forest`: the poset-derived forest;
* :mod:`~siftbus.covering.export`: JSON and Graphviz DOT dumps of either.
"""

from siftbus.covering.relations import (
    Relation,
    covers,
    equivalent,
    merge,
    overlaps,
    relation,
)

__all__ = [
    "Relation",
    "covers",
    "equivalent",
    "merge",
    "overlaps",
    "relation",
]
