"""The tree of brokers as one of them sees it: the next hop toward any broker (overlay
addresses, Tarkoma's first enabling technique), and the session epochs it may claim.

**Epochs unique by construction.** Every attachment of a session at a new broker claims
an epoch above the one it took the session from. Two brokers that number a claim from
the same epoch -- two processes reconnecting with one ``SessionState``, a fresh process
racing a live one -- must never claim the same number: a holder can give the state to
one of them only, and under the rendezvous and ping/pong handoffs both would subscribe
the session's profiles under the same gids (tag = epoch), so the loser's teardown
withdrew the winner's routes and the rows published there reached nobody (issue 30
item 2). So an epoch is a pair, *(round, broker)*, written as one integer
``round * N + rank`` (``N`` brokers in the tree, ``rank`` a broker's place among their
sorted names): every integer comparison of epochs already in the protocols orders the
pairs, round first and the broker's name second, and two brokers never claim the same
epoch. Claims of the same round are **rivals**: numbered from the same epoch, neither
knew of the other (:meth:`HandoffBase.superseded
<siftbus.broker.handoff_base.HandoffBase.superseded>` settles them); a later round
was numbered from an earlier one and supersedes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from siftbus.errors import WireError


class Overlay:
    """The tree of brokers as seen from one of them: the next hop toward any broker, and
    the epochs this broker claims."""

    def __init__(self, edges: Iterable[tuple[str, str]], me: str) -> None:
        adj: dict[str, set[str]] = defaultdict(set)
        for a, b in edges:
            adj[a].add(b)
            adj[b].add(a)
        self.me = me
        self.adjacent = {k: sorted(v) for k, v in adj.items()}
        names = sorted({me, *adj})
        self.brokers = len(names)
        """``N``: the brokers of the tree (a round of epochs has one for each)."""
        self.rank = names.index(me)
        """This broker's epoch in every round: ``round * N + rank``."""
        self._first: dict[str, str] = {}
        frontier = [me]
        seen = {me}
        while frontier:
            nxt = []
            for u in frontier:
                for v in self.adjacent.get(u, ()):
                    if v not in seen:
                        seen.add(v)
                        self._first[v] = v if u == me else self._first[u]
                        nxt.append(v)
            frontier = nxt

    def next_hop(self, dest: str) -> str:
        hop = self._first.get(dest)
        if hop is None:
            raise WireError(f"no broker {dest!r} in the tree of {self.me}", field="to")
        return hop

    def knows(self, dest: str) -> bool:
        return dest == self.me or dest in self._first

    # ---- epochs ----------------------------------------------------------------------------------

    def next_epoch(self, after: int) -> int:
        """The epoch this broker claims for an attachment numbered from ``after``: its
        own in the round after ``after``'s (never one another broker claims)."""
        return self.next_round(after) + self.rank

    def next_round(self, epoch: int) -> int:
        """The first epoch of the round after ``epoch``'s."""
        return (self.round(epoch) + 1) * self.brokers

    def round(self, epoch: int) -> int:
        """The round of an epoch (claims numbered from the same epoch share it)."""
        return epoch // self.brokers

    def rivals(self, a: int, b: int) -> bool:
        """Whether two different epochs are rival claims: numbered from the same epoch
        at two brokers, neither knowing of the other."""
        return a != b and self.round(a) == self.round(b)


__all__ = ["Overlay"]
