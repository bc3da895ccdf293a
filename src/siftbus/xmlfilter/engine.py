"""The XML event filter: subscriptions in, XML messages in, notifications out."""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, NamedTuple

from lxml import etree

from siftbus.errors import DuplicateSubscriptionError, UnknownSubscriptionError, XmlFilterError
from siftbus.xmlfilter.document import read_subscriptions
from siftbus.xmlfilter.limits import quoted
from siftbus.xmlfilter.manager import Lifecycle, State, SubscriptionStatus
from siftbus.xmlfilter.matcher import ElementMatch, Strategy, XmlMatcher, collector_paused
from siftbus.xmlfilter.output import Dispatcher, Notification
from siftbus.xmlfilter.splitter import cut
from siftbus.xmlfilter.subscription import Subscription
from siftbus.xmlfilter.views import View, project


class EventResult(NamedTuple):
    """One located event (matched or not) and its notifications (a named tuple: one is
    made per event, and a tuple is built in C)."""

    event: int
    """0-based index among the located events of the message."""
    match: ElementMatch
    notifications: tuple[Notification, ...]
    """One per view of the event its subscriptions ask for (usually one, the whole event;
    see ``siftbus.xmlfilter.views``); empty when nobody matched."""

    @property
    def notification(self) -> Notification | None:
        """The first notification (the whole event when anyone asked for it), or None."""
        return self.notifications[0] if self.notifications else None


class XmlEventFilter:
    """Subscribe, unsubscribe and publish XML; the thesis's ``XMLEventFilter``.

    ``publish`` is synchronous and thread-safe; subscriptions may change between any two
    events of a message (each event is matched atomically). Targets whose event-root name is
    new take effect from the next message (the parser's tag filter is fixed per message).
    """

    def __init__(
        self,
        *,
        strategy: Strategy = "access",
        precheck: bool = True,
        precheck_rounds: int = 4,
        serialize: bool = True,
        compile_min: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.matcher = XmlMatcher(strategy=strategy, precheck=precheck,
                                  precheck_rounds=precheck_rounds, compile_min=compile_min)
        self.serialize = serialize
        #: expiry (``timeoutInSeconds``), pause and resume; ``clock`` gives its seconds
        self.lifecycle = Lifecycle(clock)
        self._on_remove: list[Callable[[str], None]] = []

    def on_remove(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(sub_id)`` after every removal of a subscription: unsubscribed,
        expired, or undone with the rest of a refused document (a quota kept beside the
        filter stays exact without scanning it)."""
        self._on_remove.append(callback)

    # -- subscriptions ---------------------------------------------------------------
    def subscribe(self, sub: Subscription) -> str:
        """Register a subscription (its ``timeoutInSeconds`` starts now); returns its id.

        Raises :class:`~siftbus.errors.DuplicateSubscriptionError` for an exact duplicate or
        an id in use, paused subscriptions included.
        """
        life = self.lifecycle
        if sub.id in life.paused:
            raise DuplicateSubscriptionError(
                f"subscription id {quoted(sub.id)} is already in use (paused)", field=sub.id)
        if sub.digest in life.paused_digests:
            raise DuplicateSubscriptionError(
                f"duplicate of paused subscription {quoted(life.paused_digests[sub.digest])}",
                field=sub.id)
        sid = self.matcher.subscribe(sub)
        life.added(sub)
        return sid

    def subscribe_xml(
        self,
        data: bytes | str,
        *,
        source: str | None = None,
        default_method: str | None = None,
        sender: str | None = None,
        check: Callable[[], None] | None = None,
        freeze: bool = False,
    ) -> list[str]:
        """Parse, validate and register every subscription of a document (all or none).

        ``check`` is called between subscriptions; whatever it raises undoes the document
        (the HTTP endpoint bounds a request's time with it).

        ``freeze`` is for loading at start-up (a subscription file, a restored store):
        the collector's young generations are collected first, and once the document is
        registered every object the process holds is moved to the collector's permanent
        generation (``gc.freeze``). The index is long-lived and has no reference cycles,
        so without this each full collection would scan all of it again (7-10 % of
        loading 183,275 subscriptions); its objects are still freed by reference
        counting when unsubscribed. It is never done for a document arriving while the
        process serves: whatever that request holds in a reference cycle (its task, its
        frames) would then never be collected.
        """
        if freeze:
            gc.collect(1)  # so that little garbage is left to freeze: old garbage only
        with collector_paused():
            ids = self._subscribe_xml(data, source, default_method, sender, check)
            if freeze:  # before the collector is on again: its next run would scan them all
                gc.freeze()
        return ids

    def _subscribe_xml(self, data: bytes | str, source: str | None,
                       default_method: str | None, sender: str | None,
                       check: Callable[[], None] | None) -> list[str]:
        subs = read_subscriptions(data, source=source, default_method=default_method,
                                  sender=sender)
        done: list[str] = []
        try:
            for s, line in subs:
                if check is not None:
                    check()
                try:
                    done.append(self.subscribe(s))
                except XmlFilterError as exc:
                    raise exc.located(source=source, line=line) from None
        except Exception:
            for sid in done:
                self.unsubscribe(sid)
            raise
        return done

    def unsubscribe(self, sub_id: str) -> Subscription:
        """Remove a subscription, active or paused; returns it."""
        life = self.lifecycle
        sub = life.paused.get(sub_id)
        if sub is None:
            sub = self.matcher.unsubscribe(sub_id)
        life.forget(sub_id)
        for callback in self._on_remove:
            callback(sub_id)
        return sub

    def get(self, sub_id: str) -> Subscription:
        sub = self.lifecycle.paused.get(sub_id)
        return sub if sub is not None else self.matcher.get(sub_id)

    def pause(self, sub_id: str) -> None:
        """Take a subscription out of matching, keeping it (and its expiry running)."""
        if sub_id in self.lifecycle.paused:
            return
        self.lifecycle.pause(self.matcher.unsubscribe(sub_id))

    def resume(self, sub_id: str) -> None:
        """Match a paused subscription again."""
        if sub_id in self.matcher:
            return
        sub = self.lifecycle.resume(sub_id)
        try:
            self.matcher.subscribe(sub)
        except XmlFilterError:
            self.lifecycle.pause(sub)
            raise

    def renew(self, sub_id: str, seconds: int | None = None) -> SubscriptionStatus:
        """Start a subscription's time again: ``seconds``, else its last timeout, else its
        ``timeoutInSeconds`` (one without any stays without expiry)."""
        sub = self.get(sub_id)
        self.lifecycle.renew(sub_id, seconds, sub.timeout_seconds)
        return self.status(sub_id)

    def status(self, sub_id: str) -> SubscriptionStatus:
        """State (active or paused) and seconds left."""
        sub = self.get(sub_id)
        state: State = "paused" if sub_id in self.lifecycle.paused else "active"
        return self.lifecycle.status(sub, state)

    def expire(self) -> list[str]:
        """Remove every subscription whose time is up; returns their ids (matching calls
        this before each event once a deadline has passed)."""
        out = []
        for sid in self.lifecycle.due():
            with contextlib.suppress(UnknownSubscriptionError):
                self.unsubscribe(sid)
                out.append(sid)
        return out

    def define_type(self, name: str, entries: Iterable[str],
                    namespaces: Mapping[str, str] | None = None) -> None:
        """Define an event type of the hierarchy: targets (``//ObjectEvent``) and subtypes
        (``#ObjectEvent``); subscriptions with target ``#name`` match through it."""
        self.matcher.define_type(name, entries, namespaces)

    def undefine_type(self, name: str) -> None:
        self.matcher.undefine_type(name)

    def subscriptions(self) -> Iterator[Subscription]:
        """The active subscriptions."""
        return self.matcher.subscriptions()

    def paused(self) -> list[Subscription]:
        return list(self.lifecycle.paused.values())

    def __len__(self) -> int:
        return len(self.matcher)

    # -- publishing -----------------------------------------------------------------
    def iter_results(self, source: bytes | str | IO[bytes], *, name: str | None = None
                     ) -> Iterator[EventResult]:
        """Every located event of a message as it completes, matched or not."""
        matcher = self.matcher
        exact, local = matcher.root_tags()
        match = matcher.match_element
        tostring = etree.tostring
        serialize = self.serialize
        life = self.lifecycle
        clock = life.clock
        n = 0
        for el, tags in cut(source, exact, local, name=name):
            deadline = life.next_deadline
            if deadline != math.inf and deadline <= clock():
                self.expire()
            m = match(el, tags)
            if m is None:
                continue
            notes: tuple[Notification, ...] = ()
            if m.receivers:
                if matcher.has_views and self._viewed(m):
                    notes = self._views(n, el, m)
                else:
                    # UTF-8: the default (ASCII) writes non-ASCII names as character
                    # references, which are not allowed in names (not well-formed)
                    xml = (tostring(el, encoding="UTF-8", xml_declaration=False,
                                    with_tail=False) if serialize else b"")
                    notes = (Notification(n, m.targets, m.subscriptions, m.receivers, xml),)
            yield EventResult(n, m, notes)
            n += 1

    def _viewed(self, m: ElementMatch) -> bool:
        view = self.matcher.filter_view
        return any(view(f) is not None for f in m.filters)

    def _views(self, n: int, el: Any, m: ElementMatch) -> tuple[Notification, ...]:
        """One notification per distinct view the matched subscriptions ask for; a
        subscription matched through several filters sees the union of their views."""
        matcher = self.matcher
        per_sub: dict[str, set[View] | None] = {}
        for f in m.filters:
            sid, _ = matcher.filter_owner(f)
            v = matcher.filter_view(f)
            if v is None:
                per_sub[sid] = None
            elif sid not in per_sub:
                per_sub[sid] = {v}
            elif (have := per_sub[sid]) is not None:
                have.add(v)
        groups: dict[frozenset[View] | None, list[str]] = {}
        for sid, views in per_sub.items():
            groups.setdefault(None if views is None else frozenset(views), []).append(sid)
        order = sorted(groups, key=lambda k: (k is not None, min(groups[k])))
        out = []
        for key in order:
            sids = tuple(sorted(groups[key]))
            recs = tuple(sorted({matcher.get(s).receiver for s in sids}))
            if not self.serialize:
                xml = b""
            elif key is None:
                xml = etree.tostring(el, encoding="UTF-8", xml_declaration=False,
                                     with_tail=False)
            else:
                xml = project(el, key)
            out.append(Notification(n, m.targets, sids, recs, xml))
        return tuple(out)

    def publish(self, source: bytes | str | IO[bytes], *, name: str | None = None
                ) -> list[Notification]:
        """Notifications for every matched event of a message, in order."""
        return [note for r in self.iter_results(source, name=name) for note in r.notifications]

    async def publish_to(self, source: bytes | str | IO[bytes], dispatcher: Dispatcher, *,
                         name: str | None = None) -> list[Notification]:
        """Publish and hand every notification to the dispatcher."""
        notes = self.publish(source, name=name)
        for note in notes:
            await dispatcher.dispatch(note)
        return notes


def load_filter(subscription_docs: Iterable[bytes | str], **kw: object) -> XmlEventFilter:
    """A filter with every subscription of the given documents registered."""
    f = XmlEventFilter(**kw)  # type: ignore[arg-type]
    for doc in subscription_docs:
        f.subscribe_xml(doc, default_method="api", sender="local")
    return f
