"""What every covering table shares: entries, filter nodes, interfaces, router queries.

A *covering table* holds profiles as :class:`Entry` values, each registered for one
*interface* (the neighbour broker or local client it came from; by default the
profile's owner). Profiles with the same filter share one :class:`FilterNode`. The
structures differ only in which covering edges they keep (all immediate ones: poset;
one parent per node: forest; none: the flat tables of the ``simple`` and ``identity``
strategies), so the queries a router needs are written once here on top of a few
structural primitives:

* ``roots()``: the minimal cover (the filters nothing else covers);
* ``forwards(Y)``: out(Y), the minimal cover of the filters some interface other than
  ``Y`` holds — what this broker must have sent to neighbour ``Y`` [Tarkoma §3.3.2];
* ``forwards_of(id, neighbours)``: the forwards set of one filter [Tarkoma Eq. 3.1].
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from siftbus.covering.query import CoveringIndex
from siftbus.covering.relations import covers
from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.model import Event, Profile


class _FilterKey:
    """A filter key hashed once: a key is looked up several times per added profile,
    and hashing the tuple of conditions anew each time cost a tenth of a broker's
    restart from a large store."""

    __slots__ = ("hash", "key")

    def __init__(self, key: tuple[object, ...]) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FilterKey) and self.hash == other.hash \
            and self.key == other.key


@dataclass(frozen=True, slots=True)
class Entry:
    """One profile registered in a table, and where it came from."""

    profile: Profile
    """The profile; its id is the table-wide id (a broker's network-wide gid)."""
    src: str
    """The interface it came from: a neighbour broker or a local client."""
    local_id: str
    """The id its subscriber knows (a broker's client entries), else the profile id."""

    @property
    def id(self) -> str:
        return self.profile.id


NO_LINKS: dict[FilterNode, None] = {}
"""The link set of every node without links (most nodes of a table where little covers
anything): shared, so it is never changed; a node gets its own at its first link."""


class FilterNode:
    """One distinct filter in a table, with every profile registered under it.

    Structural links (``preds``/``succs`` in the poset, ``parent``/``children`` in the
    forest) are maintained by the owning table; read them, never change them.
    """

    __slots__ = ("children", "entries", "filter", "keys", "parent", "preds", "seq", "succs")

    def __init__(self, seq: int, filter: Profile) -> None:
        self.seq = seq
        #: the first profile registered here; its conditions are the node's filter
        self.filter = filter
        #: profile id -> entry, oldest first
        self.entries: dict[str, Entry] = {}
        #: the filter keys indexing this node
        self.keys: tuple[Hashable, ...] = ()
        self.preds: dict[FilterNode, None] = NO_LINKS
        self.succs: dict[FilterNode, None] = NO_LINKS
        self.parent: FilterNode | None = None
        self.children: dict[FilterNode, None] = NO_LINKS

    def __repr__(self) -> str:
        return f"FilterNode(#{self.seq}, {sorted(self.entries)})"

    @property
    def subscribers(self) -> frozenset[str]:
        """The interfaces holding this filter."""
        return frozenset(e.src for e in self.entries.values())

    def in_scope(self, neighbour: str | None, *, without: str | None = None) -> bool:
        """Whether some interface other than ``neighbour`` holds this filter (a filter is
        never sent back where it came from), not counting the profile ``without``.

        A scan that stops at the first entry from elsewhere: the entries from one
        interface outnumber one only where one client subscribes one filter many times.
        """
        for pid, e in self.entries.items():  # noqa: SIM110 (a loop is 4x faster than any())
            if e.src != neighbour and pid != without:
                return True
        return False

    def rep_for(self, neighbour: str | None) -> Profile:
        """The profile to forward to ``neighbour``: the oldest entry not from it."""
        for e in self.entries.values():
            if e.src != neighbour:
                return e.profile
        raise LookupError(f"no entry of {self!r} is held by an interface other than "
                          f"{neighbour!r}")


@runtime_checkable
class CoveringTable(Protocol):
    """A routing table of profiles organised by covering (poset or forest)."""

    def add(self, profile: Profile, iface: str | None = None,
            local_id: str | None = None) -> FilterNode:
        """Register ``profile`` for ``iface`` (default: its owner); returns its node."""

    def remove(self, profile_id: str) -> Profile:
        """Unregister a profile; a node left empty leaves the structure."""

    @property
    def entries(self) -> Mapping[str, Entry]: ...

    @property
    def comparisons(self) -> int: ...

    def get(self, profile_id: str) -> Profile: ...

    def entry(self, profile_id: str) -> Entry: ...

    def iface_of(self, profile_id: str) -> str: ...

    def node_of(self, profile_id: str) -> FilterNode: ...

    def profiles(self) -> Iterator[Profile]: ...

    def nodes(self) -> list[FilterNode]: ...

    def edges(self) -> list[tuple[FilterNode, FilterNode]]: ...

    def root_nodes(self) -> list[FilterNode]: ...

    def roots(self) -> list[Profile]: ...

    def match(self, event: Event) -> list[str]: ...

    def forwards(self, neighbour: str | None) -> list[Profile]: ...

    def forward_nodes(self, neighbour: str | None) -> list[FilterNode]: ...

    def forwards_of(self, profile_id: str, neighbours: Iterable[str]) -> frozenset[str]: ...

    def covered_by_other(self, node: FilterNode, neighbour: str | None) -> bool: ...

    def coverers(self, node: FilterNode) -> list[FilterNode]: ...

    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]: ...

    def topmost_below_each(self, node: FilterNode, neighbours: Iterable[str]
                           ) -> dict[str, list[FilterNode]]: ...

    def __len__(self) -> int: ...

    def __contains__(self, profile_id: object) -> bool: ...


class TableBase(ABC):
    """Entry bookkeeping shared by every structure (poset, forest, flat)."""

    def __init__(self, *, indexed: bool = True) -> None:
        """With ``indexed`` (the default) the table keeps a :class:`CoveringIndex` of its
        filters, so finding every node that covers (or is covered by) a new filter is one
        vectorised pass instead of a walk that tests each root; ``indexed=False`` runs
        the literature's walks literally (a reference, and the benchmark's contrast)."""
        self._index: CoveringIndex | None = CoveringIndex() if indexed else None
        self._entries: dict[str, Entry] = {}
        self._by_key: dict[Hashable, FilterNode] = {}
        self._roots: dict[FilterNode, None] = {}
        self._seq = itertools.count()
        self._comparisons = 0

    @property
    def comparisons(self) -> int:
        """Covering tests run so far (the cost measure of the literature)."""
        return self._comparisons

    @property
    def entries(self) -> Mapping[str, Entry]:
        """Every entry by profile id, oldest first (read it, never change it)."""
        return self._entries

    def _key(self, profile: Profile) -> Hashable:
        """Profiles with equal keys share a node: equal filters (flat tables: ids)."""
        return _FilterKey(profile.filter_key)

    # --- structure, per subclass ----------------------------------------------------

    @abstractmethod
    def _insert_filter(self, filter: Profile) -> FilterNode:
        """Place a new filter; return an existing equivalent node instead if there is one."""

    @abstractmethod
    def _delete_node(self, node: FilterNode) -> None:
        """Take an empty node out of the structure."""

    @abstractmethod
    def _below(self, node: FilterNode) -> Iterable[FilterNode]:
        """The nodes directly under ``node`` (immediate successors, or children)."""

    @abstractmethod
    def covered_by_other(self, node: FilterNode, neighbour: str | None) -> bool:
        """Whether another node covering ``node`` is held by an interface other than
        ``neighbour`` (any interface when ``neighbour`` is ``None``)."""

    @abstractmethod
    def coverers(self, node: FilterNode) -> list[FilterNode]:
        """Every other node covering ``node`` (ask once, test each neighbour's scope)."""

    @abstractmethod
    def topmost_below(self, node: FilterNode, neighbour: str | None) -> list[FilterNode]:
        """Nodes strictly covered by ``node`` and in scope for ``neighbour``, including
        every such node that no other in-scope node covers (a superset is allowed)."""

    def topmost_below_each(self, node: FilterNode, neighbours: Iterable[str]
                           ) -> dict[str, list[FilterNode]]:
        """:meth:`topmost_below` for several neighbours (structures may share the work)."""
        return {y: self.topmost_below(node, y) for y in neighbours}

    @abstractmethod
    def edges(self) -> list[tuple[FilterNode, FilterNode]]:
        """Every structural edge (upper, lower), in creation order."""

    def _covers(self, a: Profile, b: Profile) -> bool:
        self._comparisons += 1
        return covers(a, b)

    def _new_node(self, filter: Profile) -> FilterNode:
        return FilterNode(next(self._seq), filter)

    @property
    def indexed(self) -> bool:
        return self._index is not None

    def _index_add(self, node: FilterNode) -> None:
        if self._index is not None:
            self._index.add(node.filter, key=node)  # the index answers nodes

    def _index_remove(self, node: FilterNode) -> None:
        if self._index is not None:
            self._index.remove(node)

    def _all_covering(self, f: Profile) -> list[FilterNode]:
        """Every node whose filter covers ``f`` (equivalent ones included)."""
        assert self._index is not None
        before = self._index.exact_tests
        found = cast(list[FilterNode], self._index.covering_keys(f))
        self._comparisons += self._index.exact_tests - before
        return found

    def _all_covered(self, f: Profile) -> list[FilterNode]:
        """Every node whose filter ``f`` covers (equivalent ones included)."""
        assert self._index is not None
        before = self._index.exact_tests
        found = cast(list[FilterNode], self._index.covered_keys(f))
        self._comparisons += self._index.exact_tests - before
        return found

    # --- entries ------------------------------------------------------------------

    def add(self, profile: Profile, iface: str | None = None,
            local_id: str | None = None) -> FilterNode:
        """Register ``profile`` for ``iface`` (default: ``profile.owner``); ``local_id``
        is the id its subscriber knows (default: the profile id)."""
        if profile.id in self._entries:
            raise DuplicateProfileError(f"profile id {profile.id!r} is already registered",
                                        field=profile.id)
        return self._enter(profile, iface, local_id, self._key(profile),
                           lambda: self._insert_filter(profile))

    def _enter(self, profile: Profile, iface: str | None, local_id: str | None,
               key: Hashable, place: Callable[[], FilterNode]) -> FilterNode:
        """Register ``profile`` in the node of ``key``, or in ``place()`` (the node the
        structure puts its filter in) when no node has that key yet."""
        node = self._by_key.get(key)
        if node is None:
            node = place()
            # An equivalent filter written differently joins the node under a second key.
            node.keys += (key,)
            self._by_key[key] = node
        e = Entry(profile, profile.owner if iface is None else iface,
                  profile.id if local_id is None else local_id)
        node.entries[profile.id] = e
        self._entries[profile.id] = e
        return node

    def remove(self, profile_id: str) -> Profile:
        """Unregister and return a profile; its node goes when it holds no profile."""
        node = self.node_of(profile_id)
        e = self._entries.pop(profile_id)
        del node.entries[profile_id]
        if not node.entries:
            self._delete_node(node)
            for key in node.keys:
                del self._by_key[key]
        return e.profile

    def get(self, profile_id: str) -> Profile:
        return self.entry(profile_id).profile

    def entry(self, profile_id: str) -> Entry:
        try:
            return self._entries[profile_id]
        except KeyError:
            raise UnknownProfileError(f"no profile with id {profile_id!r}",
                                      field=profile_id) from None

    def iface_of(self, profile_id: str) -> str:
        """The interface the profile was registered for."""
        return self.entry(profile_id).src

    def node_of(self, profile_id: str) -> FilterNode:
        # Every key a node was registered under leads to it while it lives.
        return self._by_key[self._key(self.entry(profile_id).profile)]

    def profiles(self) -> Iterator[Profile]:
        return iter([e.profile for n in self.nodes() for e in n.entries.values()])

    def nodes(self) -> list[FilterNode]:
        """Every node, oldest first."""
        return sorted(set(self._by_key.values()), key=lambda n: n.seq)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._entries

    @property
    def node_count(self) -> int:
        """Distinct filters held."""
        return len(set(self._by_key.values()))

    # --- queries ------------------------------------------------------------------

    def root_nodes(self) -> list[FilterNode]:
        """Nodes no other node covers, oldest first."""
        return sorted(self._roots, key=lambda n: n.seq)

    def roots(self) -> list[Profile]:
        """The root set (minimal cover of every filter held): one profile per root."""
        return [n.rep_for(None) for n in self.root_nodes()]

    def match(self, event: Event) -> list[str]:
        """Ids of the profiles ``event`` matches, sorted: walk from the roots and descend
        only below matching nodes (whatever a node covers cannot match if it does not)."""
        out: list[str] = []
        seen: set[FilterNode] = set()
        stack = [n for n in self._roots if n.filter.matches(event)]
        seen.update(stack)
        while stack:
            node = stack.pop()
            out.extend(node.entries)
            for c in self._below(node):
                if c not in seen:
                    seen.add(c)
                    if c.filter.matches(event):
                        stack.append(c)
        out.sort()
        return out

    def forward_nodes(self, neighbour: str | None) -> list[FilterNode]:
        """out(neighbour): the minimal cover of the nodes in scope for it, oldest first."""
        cand: dict[FilterNode, None] = {}
        seen: set[FilterNode] = set()
        stack = list(self._roots)
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            if node.in_scope(neighbour):
                cand[node] = None
            else:
                stack.extend(self._below(node))
        keep = [n for n in cand if n in self._roots or not self.covered_by_other(n, neighbour)]
        return sorted(keep, key=lambda n: n.seq)

    def forwards(self, neighbour: str | None) -> list[Profile]:
        """What neighbour ``neighbour`` must hold from us: one profile per filter of
        out(neighbour), never one the neighbour itself registered. With ``None``, the
        root set (hierarchical routing to a parent that sent nothing)."""
        return [n.rep_for(neighbour) for n in self.forward_nodes(neighbour)]

    def forwards_of(self, profile_id: str, neighbours: Iterable[str]) -> frozenset[str]:
        """The neighbours this profile's filter must be forwarded to (Tarkoma Eq. 3.1):
        those for which some other interface holds it and no covering filter is already
        forwarded."""
        node = self.node_of(profile_id)
        return frozenset(y for y in neighbours
                         if node.in_scope(y) and not self.covered_by_other(node, y))


__all__ = ["NO_LINKS", "CoveringTable", "Entry", "FilterNode", "TableBase"]
