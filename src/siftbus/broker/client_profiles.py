"""The profiles and advertisements of a broker's local clients.

A client's SUB, UNSUB, ADV and UNADV change the broker's routing table all or nothing:
each profile is checked against the client's rights and quota (:mod:`.access`),
narrowed to disjoint pieces where a right cuts it, registered under its network-wide id
(a session's keeps its own, :mod:`.session_table`) and, with a store, written durably in
the same step, so the table and the store never disagree.
"""

from __future__ import annotations

from typing import Any, Protocol

from siftbus.errors import DuplicateProfileError, UnknownProfileError
from siftbus.match.gcpause import full_collections_deferred
from siftbus.model import Profile, Schema
from siftbus.wire.frames import get
from siftbus.wire.limits import Limits
from siftbus.wire.profiles import decode_profile_texts, decode_profiles

from .access import ClientAccess
from .protocols import Routing
from .session_table import SessionTable
from .store import ProfileStore


class ProfilesHost(Protocol):
    """What the client profiles need from their broker node."""

    name: str
    schema: Schema
    limits: Limits
    store: ProfileStore | None
    routing: Routing
    access: ClientAccess
    sessions: SessionTable


class ClientProfiles:
    """The local clients' profiles and advertisements in the broker's routing table."""

    def __init__(self, host: ProfilesHost) -> None:
        self.host = host
        self._pieces: dict[str, tuple[str, ...]] = {}
        """gid of a narrowed profile -> the gids of its pieces (when more than one)."""
        self._adverts: dict[str, int] = {}
        """Client link -> advertisements it holds (counted in its principal's quota)."""

    def forget(self, link: str) -> None:
        """Remove every profile and advertisement of a client (its session ended)."""
        self._unadvertise_all(link)
        self._forget_profiles(link)
        if self.host.store is not None:
            self.host.store.delete_client(link[1:])

    def detach(self, link: str) -> None:
        """A client left (without a session): its advertisements go (it can no longer
        publish here); without a store its profiles go too, with one they stay."""
        self._unadvertise_all(link)
        if self.host.store is None:
            self._forget_profiles(link)

    def _unadvertise_all(self, link: str) -> None:
        self.host.routing.unadvertise_all(link)
        self.host.access.release(link[1:], self._adverts.pop(link, 0))

    def _gid(self, client: str, pid: str) -> str:
        """The network-wide id of a client's profile (a session's keeps its own)."""
        return self.host.sessions.gid(client, pid) or f"{self.host.name}/{client}/{pid}"

    def _advert_gid(self, client: str, pid: str) -> str:
        s = self.host.sessions.sessions.get(client)
        if s is not None:
            return f"~{client}/{s.epoch}/{pid}"
        return f"{self.host.name}/{client}/{pid}"

    def decode(self, body: dict[str, Any], client: str,
               key: str = "profiles") -> list[Profile]:
        """The profiles of a client's SUB or ADV, checked against the broker's limits."""
        if "texts" in body:
            out = decode_profile_texts(body["texts"], self.host.schema, self.host.limits)
        else:
            out = decode_profiles(get(body, key, list), self.host.schema, self.host.limits,
                                  what=key)
        return [p.with_id(p.id, client) for p in out]

    def not_held(self, client: str, profiles: list[Profile]) -> list[Profile]:
        """``profiles`` without those the client holds already, with the same
        conditions: subscribing a profile again is idempotent -- a session resumed
        with its profiles kept, or a durable client restarted, subscribes them again
        (``siftbus subscribe --session`` restarted: issue 30). The same id with other
        conditions is refused (:class:`DuplicateProfileError`): unsubscribe it first."""
        entries = self.host.routing.table.entries
        link = "@" + client
        out = []
        for p in profiles:
            gid = self._gid(client, p.id)
            e = entries.get(gid)
            if e is None or e.src != link:
                out.append(p)
            elif gid in self._pieces or e.profile.etype.name != p.etype.name \
                    or e.profile.conditions != p.conditions:
                raise DuplicateProfileError(
                    f"profile {p.id!r} is already subscribed with other conditions; "
                    "unsubscribe it first", field=p.id)
        return out

    def subscribe_all(self, client: str, profiles: list[Profile],
                      persist: bool = True,
                      pieces: list[tuple[Profile, ...]] | None = None) -> None:
        """Subscribe every profile or none (one store transaction): on any failure --
        a duplicate id, a store error, a right or quota refused -- the table and the
        store are left as they were, so they never disagree.

        Each profile is checked against the client's subscribe right (unless its
        ``pieces`` are given) and registered as itself or, narrowed, as disjoint pieces
        under gids ``<gid>``, ``<gid>#2``, ... that all notify under its id. Without
        ``persist`` (restoring durable profiles) the quota is counted by the caller."""
        link = "@" + client
        if pieces is None:
            pieces = self.host.access.subscribe_pieces(link, profiles)
        store = self.host.store if persist else None
        added: list[str] = []
        if persist:
            self.host.access.reserve(link, len(profiles))
        try:
            if store is not None:
                store.begin()
                for p in profiles:
                    store.insert(client, p)
            batch, split = self._registered(client, profiles, pieces)
            self.host.routing.subscribe_many(link, batch)  # all or none
            added.extend(x.id for x, _ in batch)
            self._pieces.update(split)
            if store is not None:
                store.commit()
        except BaseException:
            for g in reversed(added):
                self.host.routing.unsubscribe(link, g)
                self._pieces.pop(g, None)
            if store is not None:
                store.rollback()
            if persist:
                self.host.access.release(client, len(profiles))
            raise

    def _registered(self, client: str, profiles: list[Profile],
                    pieces: list[tuple[Profile, ...]]
                    ) -> tuple[list[tuple[Profile, str]], dict[str, tuple[str, ...]]]:
        """What the table registers for a client's profiles: each piece under its gid,
        with the profile's own id, and the gids of each narrowed profile's pieces."""
        batch: list[tuple[Profile, str]] = []
        split: dict[str, tuple[str, ...]] = {}
        for p, cut in zip(profiles, pieces, strict=True):
            gid = self._gid(client, p.id)
            gids = self._piece_gids(gid, len(cut))
            batch.extend((x.with_id(g, client), p.id) for g, x in zip(gids, cut, strict=True))
            if len(gids) > 1:
                split[gid] = gids
        return batch, split

    @staticmethod
    def _piece_gids(gid: str, n: int) -> tuple[str, ...]:
        """``#`` never occurs in a profile id, so piece gids cannot clash with one."""
        return (gid, *(f"{gid}#{k}" for k in range(2, n + 1)))

    def restore(self, store: ProfileStore) -> None:
        """Load the durable profiles, each under its owner's rights of now, into the
        table in one step (as one SUB frame goes: the poset's bulk insert), in the
        order they were stored."""
        items: list[tuple[Profile, str, str]] = []
        split: dict[str, tuple[str, ...]] = {}
        with full_collections_deferred():  # builds only long-lived objects
            for client, p in store.load(self.host.schema):
                cut = self.host.access.restored_pieces(client, p)
                if cut is not None:
                    batch, more = self._registered(client, [p], [cut])
                    items.extend((x, "@" + client, pid) for x, pid in batch)
                    split.update(more)
            self.host.routing.subscribe_from(items)  # all or none
        self._pieces.update(split)

    def _forget_profiles(self, link: str) -> None:
        """Remove every profile of a client that left (no store: nothing is durable)."""
        gone = self.host.routing.unsubscribe_all(link)
        for e in gone:
            self._pieces.pop(e.id, None)
        self.host.access.release(link[1:], len({e.local_id for e in gone}))

    def advertise_all(self, link: str, client: str, profiles: list[Profile]) -> None:
        """Advertise within the client's advertise right and profile quota."""
        self.host.access.check_advertise(link, profiles)
        self.host.access.reserve(link, len(profiles))
        self._adverts[link] = self._adverts.get(link, 0) + len(profiles)
        for p in profiles:
            self.host.routing.advertise(link, p.with_id(self._advert_gid(client, p.id), client))

    def unadvertise(self, link: str, client: str, pid: str) -> None:
        gid = self._advert_gid(client, pid)
        if gid in self.host.routing.table.adverts_from(link) and self._adverts.get(link):
            self._adverts[link] -= 1  # (a handoff's adverts were never counted here)
            self.host.access.release(client, 1)
        self.host.routing.unadvertise(link, gid)

    def unsubscribe_all(self, client: str, pids: list[str]) -> None:
        """Remove every profile or none (as :meth:`subscribe_all`)."""
        link = "@" + client
        store = self.host.store
        removed: list[tuple[str, Profile]] = []
        try:
            if store is not None:
                store.begin()
                for pid in pids:
                    store.delete(client, pid)
            for pid in pids:
                gid = self._gid(client, pid)
                e = self.host.routing.table.entries.get(gid)
                if e is None or e.src != link:
                    raise UnknownProfileError(f"{client} has no profile {pid!r}", field=pid)
                for g in self._pieces.get(gid, (gid,)):
                    piece = self.host.routing.table.entries[g].profile
                    self.host.routing.unsubscribe(link, g)
                    removed.append((pid, piece))
            if store is not None:
                store.commit()
        except BaseException:
            for pid, p in reversed(removed):
                self.host.routing.subscribe(link, p, local_id=pid)
            if store is not None:
                store.rollback()
            raise
        for pid in pids:
            self._pieces.pop(self._gid(client, pid), None)
        self.host.access.release(client, len(pids))


__all__ = ["ClientProfiles", "ProfilesHost"]
