"""Composite profiles at the subscriber's access broker (Bittner 2003, §7.2).

A client subscribes a composite profile through the broker-hosted service ``composite``
(``client.subscribe_composite(line)``, or ``CALL composite.subscribe {texts}``). Its
access broker then

* subscribes every component as an ordinary profile of that client, under the local id
  ``composite:<id>/<label>``: the components are routed by whatever protocol and strategy
  the network runs (covering and merging apply to them like to any profile);
* takes the notifications of those components out of what the client would receive
  (:meth:`CompositeService.intercept`, called by the node's ``deliver``) and, once the
  routing step is over (:meth:`CompositeService.end_step`), feeds each event once to one
  :class:`~siftbus.match.composite.CompositeEngine` for all its local clients;
* pushes each match to its client as a service message (REPLY ``service=composite``)
  carrying the component events (``label, type, keys, time, src, seq``).

Event time: the type's ``"@time"`` attribute, else the publication's ``ts`` (stamped
once when it is published and carried unchanged, so every broker sees the same time);
the tie-breaker is the publication id ``(src, seq)``. The broker's clock moves the
watermark (:meth:`tick`, driven by the server), so windows close without further events;
composite subscriptions end with the client's connection (they are not durable).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from siftbus.errors import (
    AccessDenied,
    ConfigError,
    ProfileError,
    ProfileSyntaxError,
    SiftbusError,
    UnknownProfileError,
    WireError,
)
from siftbus.lang.composite import LIMITS as COMPOSITE_LIMITS
from siftbus.lang.composite import CompositeProfile, format_composite, parse_composite
from siftbus.match.composite import (
    CompositeEngine,
    CompositeMatch,
    EngineLimits,
    StampedEvent,
    event_time,
    seconds,
)
from siftbus.model import Schema
from siftbus.wire.events import Block, encode_event_keys
from siftbus.wire.frames import Message, MsgType
from siftbus.wire.limits import Limits

from .access import ClientAccess

SERVICE = "composite"
"""The name of the broker-hosted service."""

PREFIX = "composite:"
"""Local ids of component profiles start with it (``:`` is no profile-id character, so
they never meet a client's own profile ids)."""

Items = list[tuple[Block, np.ndarray, list[str]]]


class _Routing(Protocol):
    def subscribe(self, src: str, profile: Any, local_id: str | None = None) -> None: ...

    def unsubscribe(self, src: str, gid: str) -> None: ...


class CompositeHost(Protocol):
    """What the service needs of its broker node."""

    name: str
    schema: Schema
    clients: set[str]
    limits: Limits

    @property
    def routing(self) -> _Routing: ...

    @property
    def access(self) -> ClientAccess: ...

    def transport_send(self, link: str, msg: Message) -> None: ...


def encode_match(m: CompositeMatch, local_id: str) -> dict[str, Any]:
    """A match as the service pushes it: the client's own profile id, the completion
    time and ``[label, type, keys, time, src, seq]`` per component event (keys in schema
    order: ordinals and scaled decimals as in event blocks; times in microseconds)."""
    events = []
    for label, ev in m.bindings:
        src, seq = ev.order if len(ev.order) == 2 else ("", 0)
        events.append([label, ev.event.etype.name, encode_event_keys(ev.event), ev.time, src,
                       seq])
    return {"profile": local_id, "completed": m.completed, "events": events}


def _listed(c: CompositeProfile, client: str) -> str:
    """The line ``list`` answers for ``c`` (its client as subscriber)."""
    return format_composite(c.with_id(c.id, client))


_ENGINE_DEFAULTS = EngineLimits()
TIME_SLICE = 0.02
"""Default seconds of composite evaluation in one go (``[network.composite] time_slice``)."""


@dataclass(frozen=True, slots=True)
class CompositeSettings:
    """How a broker evaluates composite profiles (``[network.composite]``)."""

    limits: EngineLimits = _ENGINE_DEFAULTS
    """Lateness bound, runs per profile, events waiting for the watermark."""
    clock: bool = True
    """Whether the broker's clock moves the watermark (turn it off to replay events
    whose declared times are not the present)."""
    time_slice: float = TIME_SLICE
    """Longest the broker evaluates composite events in one go (seconds) before it
    answers other requests; the rest waits for the next turn of its event loop."""

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any]) -> CompositeSettings:
        """``lateness`` (seconds), ``state_limit``, ``max_buffered``, ``max_matches``,
        ``clock``, ``time_slice`` (seconds); ``ConfigError`` names the key."""
        known = {"lateness", "state_limit", "max_buffered", "max_matches", "clock",
                 "time_slice"}
        unknown = set(table) - known
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(f"[network.composite] has no setting {key!r} (lateness, "
                              "state_limit, max_buffered, max_matches, clock, time_slice)",
                              field=key)
        lateness = table.get("lateness", 0)
        if isinstance(lateness, bool) or not isinstance(lateness, int | float) \
                or not 0 <= lateness <= 10**9:
            raise ConfigError("[network.composite] lateness must be seconds >= 0",
                              field="lateness")
        ints = {}
        for key in ("state_limit", "max_buffered", "max_matches"):
            v = table.get(key, getattr(_ENGINE_DEFAULTS, key))
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"[network.composite] {key} must be a whole number >= 1",
                                  field=key)
            ints[key] = v
        clock = table.get("clock", True)
        if not isinstance(clock, bool):
            raise ConfigError("[network.composite] clock must be true or false",
                              field="clock")
        time_slice = table.get("time_slice", TIME_SLICE)
        if isinstance(time_slice, bool) or not isinstance(time_slice, int | float) \
                or not 0.001 <= time_slice <= 10:
            raise ConfigError("[network.composite] time_slice must be seconds in "
                              "[0.001, 10]", field="time_slice")
        return cls(EngineLimits(lateness=seconds(lateness), **ints), clock,
                   float(time_slice))


COMPOSITE_DEFAULTS = CompositeSettings()


class CompositeService:
    """The composite profiles of one broker's local clients."""

    def __init__(self, host: CompositeHost, settings: CompositeSettings | None = None
                 ) -> None:
        self.host = host
        settings = settings or COMPOSITE_DEFAULTS
        self.limits = settings.limits
        #: the broker's clock moves the watermark (off for replays of old event times)
        self.clock_watermark = settings.clock
        # The broker's routing table matches the components; the engine's own matcher is
        # only the id directory (the reference engine: nothing to compile).
        self.engine = CompositeEngine(limits=self.limits, matcher="reference")
        self._profiles: dict[str, dict[str, CompositeProfile]] = defaultdict(dict)
        self._local: dict[str, dict[str, str]] = defaultdict(dict)
        """Per client link: component local id -> the engine's component id."""
        self._step: dict[tuple[int, Any], tuple[StampedEvent, list[str]]] = {}
        """Events of the current routing step, in arrival order, with their components."""
        self._backlog: deque[tuple[StampedEvent, list[str]]] = deque()
        """Events routed but not evaluated yet (more than one time slice of work)."""
        self.time_slice = settings.time_slice
        #: set by the server: call :meth:`resume` on a later turn of the event loop (when
        #: unset, as in the simulator, every step is evaluated at once)
        self.wake: Callable[[], object] | None = None
        self._scheduled = False
        self.deferred = 0
        """Times evaluation stopped at the end of a time slice to let other work run."""
        self.pushed = 0
        """Matches pushed to clients."""
        self.dropped = 0
        """Matches whose client had gone."""

    # ---- the service (CALL composite.<method>) ---------------------------------------
    def handle(self, method: str, args: dict[str, Any], caller: str) -> Any:
        if method == "subscribe":
            return self.subscribe(caller, args.get("texts"))
        if method == "unsubscribe":
            ids = args.get("ids")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise WireError("composite.unsubscribe needs ids: [id, ...]", field="ids")
            self.unsubscribe(caller, ids)
            return {"ids": ids}
        if method == "list":
            return [{"id": cid, "text": _listed(p.with_id(cid, caller), caller)}
                    for cid, p in self._profiles.get(caller, {}).items()]
        if method == "stats":
            s = self.engine.stats()
            return {"profiles": s.profiles, "automata": s.automata, "offered": s.offered,
                    "late": s.late, "buffered": s.buffered, "runs": s.runs, "shed": s.shed,
                    "matches": s.matches, "capped": s.capped, "pushed": self.pushed,
                    "dropped": self.dropped, "backlog": len(self._backlog),
                    "deferred": self.deferred}
        raise WireError(f"the composite service has no method {method!r} "
                        "(subscribe, unsubscribe, list, stats)", field="method")

    def subscribe(self, client: str, texts: Any) -> dict[str, Any]:
        """Parse and install composite lines for ``client`` (all or none)."""
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise WireError("composite.subscribe needs texts: [line, ...]", field="texts")
        limits = self.host.limits
        if len(texts) > limits.max_profiles:
            raise WireError(f"{len(texts)} composite profiles in one request, over the "
                            f"limit of {limits.max_profiles}", field="max_profiles")
        parsed: list[CompositeProfile] = []
        for i, text in enumerate(texts, start=1):
            try:
                c = parse_composite(text, self.host.schema, line=i)
            except SiftbusError as exc:
                raise exc.located(source="composite") from None
            listed = len(_listed(c, client))
            if listed > COMPOSITE_LIMITS.max_line:
                # ``list`` names the subscriber: that form must parse again too
                raise ProfileSyntaxError(
                    f"composite profile is listed as {listed} characters (with "
                    f"'@{client}'), longer than {COMPOSITE_LIMITS.max_line}",
                    source="composite", line=i, column=min(len(text), listed) + 1)
            parsed.append(c)
        mine = self._profiles[client]
        seen: set[str] = set()
        for c in parsed:
            if c.id in mine or c.id in seen:
                raise ProfileError(f"{client} already has a composite profile {c.id!r}",
                                   field=c.id)
            seen.add(c.id)
        self._check_rights(client, parsed)
        done: list[str] = []
        try:
            for c in parsed:
                self._install(client, c)
                done.append(c.id)
        except BaseException:
            for cid in reversed(done):
                self._uninstall(client, cid)
            raise
        return {"ids": [c.id for c in parsed]}

    def _check_rights(self, client: str, parsed: list[CompositeProfile]) -> None:
        """Every component, negated ones too, must lie within the client's subscribe right
        as it is: a narrowed component would change what the pattern means (a negation
        would be judged on the permitted events only), so it is refused, not narrowed."""
        access = self.host.access
        if access.open:
            return
        link = "@" + client
        comps = [comp.profile.with_id(f"{c.id}/{comp.label}", client)
                 for c in parsed for comp in c.components()]
        for p, cut in zip(comps, access.subscribe_pieces(link, comps), strict=True):
            if cut != (p,):
                who = access.principal(link).name
                raise access.guard.refuse(AccessDenied(
                    f"{who} may not subscribe the composite component {p.id} "
                    f"({p.type_name}): it reaches outside the subscribe right",
                    principal=who, action="subscribe", object=p.id),
                    principal=who, action="subscribe", object=p.id)

    def unsubscribe(self, client: str, ids: list[str]) -> None:
        mine = self._profiles.get(client, {})
        for cid in ids:
            if cid not in mine:
                raise UnknownProfileError(f"{client} has no composite profile {cid!r}",
                                          field=cid)
        for cid in ids:
            self._uninstall(client, cid)

    def client_down(self, client: str) -> None:
        """The client's connection is gone: its composite profiles go too."""
        for cid in list(self._profiles.get(client, {})):
            self._uninstall(client, cid)
        self._profiles.pop(client, None)
        self._local.pop("@" + client, None)

    def _gid(self, client: str, local: str) -> str:
        return f"{self.host.name}/{client}/{local}"

    def _install(self, client: str, c: CompositeProfile) -> None:
        link = "@" + client
        eid = f"{client}/{c.id}"
        ec = c.with_id(eid, client)
        self.engine.add(ec)
        routed: list[str] = []
        comps = ec.components()
        try:
            # the components count against the principal's profile quota like profiles
            self.host.access.reserve(link, len(comps))
        except BaseException:
            self.engine.remove(eid)
            raise
        try:
            for comp in comps:
                local = f"{PREFIX}{c.id}/{comp.label}"
                gid = self._gid(client, local)
                self.host.routing.subscribe(link, comp.profile.with_id(gid, client),
                                            local_id=local)
                routed.append(gid)
                self._local[link][local] = comp.profile.id
        except BaseException:
            for gid in routed:
                self.host.routing.unsubscribe(link, gid)
            self.host.access.release(client, len(comps))
            self.engine.remove(eid)
            raise
        self._profiles[client][c.id] = c

    def _uninstall(self, client: str, cid: str) -> None:
        link = "@" + client
        c = self._profiles[client].pop(cid)
        local = self._local[link]
        removed = 0
        for comp in c.components():
            lid = f"{PREFIX}{cid}/{comp.label}"
            local.pop(lid, None)
            # (gone already, and released, when the node removed a departed client's
            # profiles)
            with contextlib.suppress(UnknownProfileError):
                self.host.routing.unsubscribe(link, self._gid(client, lid))
                removed += 1
        self.host.access.release(client, removed)
        self.engine.remove(f"{client}/{cid}")

    # ---- events ---------------------------------------------------------------------
    def intercept(self, link: str, items: Items) -> Items:
        """Take the rows of a client's component profiles out of ``items`` and evaluate
        them; returns what the client gets as ordinary notifications."""
        local = self._local.get(link)
        if not local:
            return items
        rest: Items = []
        offers: list[tuple[int, StampedEvent, list[str]]] = []
        for block, counts, pids in items:
            if not any(p in local for p in pids):
                rest.append((block, counts, pids))
                continue
            keep_rows: list[int] = []
            keep_counts: list[int] = []
            keep_pids: list[str] = []
            events = block.events()
            srcs = block.srcs()
            seqs = block.seq.tolist()
            tss = block.ts.tolist()
            at = block.at.tolist() if block.at is not None else None
            i0 = 0
            for row, k in enumerate(counts.tolist()):
                row_pids = pids[i0:i0 + k]
                i0 += k
                ours = [local[p] for p in row_pids if p in local]
                theirs = [p for p in row_pids if p not in local]
                if ours:
                    ev = events[row]
                    t = event_time(ev)
                    stamped = StampedEvent(ev, seconds(tss[row]) if t is None else t,
                                           (srcs[row], seqs[row]))
                    offers.append((at[row] if at is not None else len(offers), stamped, ours))
                if theirs:
                    keep_rows.append(row)
                    keep_counts.append(len(theirs))
                    keep_pids.extend(theirs)
            if keep_rows:
                rest.append((block.take(np.array(keep_rows, np.int64)),
                             np.array(keep_counts, np.int64), keep_pids))
        for _, stamped, ours in sorted(offers, key=lambda o: o[0]):
            got = self._step.get(stamped.position)
            if got is None:
                self._step[stamped.position] = (stamped, ours)
            else:
                got[1].extend(ours)
        return rest

    def end_step(self) -> None:
        """The routing step is over: evaluate each event it delivered to local
        composite components once, with the components of every local client (equal
        profiles of several clients share an automaton, which must see an event once)."""
        if not self._step:
            return
        step, self._step = self._step, {}
        self._backlog.extend(step.values())
        if not self._scheduled:
            self._drain()

    @property
    def backlog(self) -> int:
        """Events routed to composite components and not evaluated yet (the engine's
        reorder buffer not counted)."""
        return len(self._backlog)

    @property
    def busy(self) -> bool:
        """Whether evaluation waits for a later time slice."""
        return bool(self._backlog) or self.engine.pending

    def resume(self) -> None:
        """Evaluate the next time slice (the server's wake-up)."""
        self._scheduled = False
        self._drain()

    def _deadline(self) -> float | None:
        return None if self.wake is None else time.perf_counter() + self.time_slice

    def _drain(self) -> None:
        """Evaluate the backlog in arrival order, then what the watermark passed, for at
        most ``time_slice`` seconds (all of it when no server wakes the service); push
        the matches; ask for a wake-up when work is left."""
        backlog = self._backlog
        deadline = self._deadline()
        found: list[CompositeMatch] = []
        try:
            while backlog:
                stamped, ours = backlog.popleft()
                found.extend(self.engine.offer(stamped, ours, deadline=deadline))
                if deadline is not None and time.perf_counter() >= deadline:
                    break
            else:
                if self.engine.pending:
                    found.extend(self.engine.release(deadline=deadline))
        finally:
            self._push(found)
            self._later()

    def _later(self) -> None:
        if self.wake is not None and not self._scheduled and self.busy:
            self._scheduled = True
            self.deferred += 1
            self.wake()

    def tick(self, now: float) -> None:
        """The broker's clock reads ``now`` (seconds): no event published before
        ``now - lateness`` is still on its way; close what that allows (not while routed
        events wait to be evaluated: they would be late)."""
        if self.clock_watermark and len(self.engine) and not self._backlog:
            try:
                self._push(self.engine.advance(seconds(now), deadline=self._deadline()))
            finally:
                self._later()

    def flush(self) -> None:
        """Evaluate everything buffered and close every window (end of a stream, e.g.
        in the simulator); later events are late."""
        wake, self.wake = self.wake, None
        try:
            self._drain()
        finally:
            self.wake = wake
        self._push(self.engine.flush())

    def _push(self, found: list[CompositeMatch]) -> None:
        if not found:
            return
        by_client: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for m in found:
            client = m.subscriber
            by_client[client].append(encode_match(m, m.profile[len(client) + 1:]))
        for client, ms in by_client.items():
            link = "@" + client
            if link not in self.host.clients:
                self.dropped += len(ms)
                continue
            self.pushed += len(ms)
            self.host.transport_send(link, Message(MsgType.REPLY, {
                "service": SERVICE, "event": {"matches": ms}}))


Ticker = Callable[[float], None]

__all__ = ["COMPOSITE_DEFAULTS", "PREFIX", "SERVICE", "CompositeHost", "CompositeService",
           "CompositeSettings", "Ticker", "encode_match"]
