"""Subscriber and publisher mobility: the handoff protocols behind one interface.

When a client with a session connects to a broker other than the one holding its session,
the new broker takes the session over with the network's handoff protocol
(``handoff = ...`` in ``[network]``), one of Tarkoma's chapter 5:

=============  ===========================================================================
``pingpong``   the generic protocol from publish/subscribe primitives (Siena's ping/pong;
               the baseline; not mobility-safe in general): :mod:`.pingpong`
``acyclic``    the acyclic-graph handoff: the path from the new broker toward the old one
               is redirected hop by hop, then the buffer follows: :mod:`.handoff_paths`
``rendezvous`` the rendezvous-point handoff with completeness checking (rendezvous routing
               only; skipped when a complete covering subscription is already there)
=============  ===========================================================================

Every protocol is a :class:`~siftbus.broker.handoff_base.HandoffBase`: the node hands it
``HANDOFF`` messages (:meth:`receive`) and the session table asks it to fetch an arriving
session (:meth:`move_in`) and to hand one over. ``claims`` names the routing protocols
under which it claims mobility-safety -- no notification lost, none twice -- which the
simulator checks on random trees and moves (``tests/broker/test_mobility_sim.py``).
``docs/mobility.md`` explains the protocols, their guarantees and their cost.
"""

from __future__ import annotations

from collections.abc import Iterable

from siftbus.errors import ConfigError

from .handoff_base import HandoffBase, HandoffHost, Overlay, advert_gid, check_claims
from .handoff_paths import AcyclicGraph, RendezvousPoint
from .pingpong import CONTROL_SCHEMA, PingPong
from .sessions import SessionPolicy

HANDOFFS: dict[str, type[HandoffBase]] = {
    "pingpong": PingPong,
    "acyclic": AcyclicGraph,
    "rendezvous": RendezvousPoint,
}
"""The handoff protocols by the name the network config uses."""


def default_handoff(protocol: str, strategy: str = "covering") -> str:
    """``rendezvous`` under rendezvous routing, ``pingpong`` under merging (the path
    protocols cannot follow merged profiles), else ``acyclic``."""
    if strategy == "merging":
        return "pingpong"
    return "rendezvous" if protocol == "rendezvous" else "acyclic"


def make_handoff(name: str, host: HandoffHost, edges: Iterable[tuple[str, str]],
                 policy: SessionPolicy, *, protocol: str, strategy: str) -> HandoffBase:
    """The handoff protocol ``name`` for a broker (checked against its routing)."""
    cls = HANDOFFS.get(name)
    if cls is None:
        raise ConfigError(f"unknown handoff {name!r}; choose one of {', '.join(HANDOFFS)}",
                          field="handoff")
    check_claims(name, protocol, strategy)
    return cls(host, edges, policy)


__all__ = ["CONTROL_SCHEMA", "HANDOFFS", "AcyclicGraph", "HandoffBase", "Overlay",
           "PingPong", "RendezvousPoint", "advert_gid", "default_handoff", "make_handoff"]
