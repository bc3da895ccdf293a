"""The XML event filter: subscriptions in, XML messages in, notifications out."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator
from typing import IO, NamedTuple

from lxml import etree

from siftbus.errors import XmlFilterError
from siftbus.xmlfilter.document import read_subscriptions
from siftbus.xmlfilter.matcher import ElementMatch, Strategy, XmlMatcher
from siftbus.xmlfilter.output import Dispatcher, Notification
from siftbus.xmlfilter.splitter import cut
from siftbus.xmlfilter.subscription import Subscription


class EventResult(NamedTuple):
    """One located event (matched or not) and, when it has receivers, its notification
    (a named tuple: one is made per event, and a tuple is built in C)."""

    event: int
    """0-based index among the located events of the message."""
    match: ElementMatch
    notification: Notification | None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a document is registered: it builds
    thousands of long-lived objects without cycles, and each full collection would scan
    the whole index again (a quarter of the loading time at 183,275 subscriptions). It is
    enabled again at the end if it was on (by whichever call ends first, when several
    documents are registered at once)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
    ) -> None:
        self.matcher = XmlMatcher(strategy=strategy, precheck=precheck,
                                  precheck_rounds=precheck_rounds, compile_min=compile_min)
        self.serialize = serialize

    # -- subscriptions ---------------------------------------------------------------
    def subscribe(self, sub: Subscription) -> str:
        return self.matcher.subscribe(sub)

    def subscribe_xml(
        self,
        data: bytes | str,
        *,
        source: str | None = None,
        default_method: str | None = None,
        sender: str | None = None,
        check: Callable[[], None] | None = None,
    ) -> list[str]:
        """Parse, validate and register every subscription of a document (all or none).

        ``check`` is called between subscriptions; whatever it raises undoes the document
        (the HTTP endpoint bounds a request's time with it).
        """
        with _collector_paused():
            return self._subscribe_xml(data, source, default_method, sender, check)

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
                    done.append(self.matcher.subscribe(s))
                except XmlFilterError as exc:
                    raise exc.located(source=source, line=line) from None
        except Exception:
            for sid in done:
                self.matcher.unsubscribe(sid)
            raise
        return done

    def unsubscribe(self, sub_id: str) -> Subscription:
        return self.matcher.unsubscribe(sub_id)

    def subscriptions(self) -> Iterator[Subscription]:
        return self.matcher.subscriptions()

    def __len__(self) -> int:
        return len(self.matcher)

    # -- publishing -----------------------------------------------------------------
    def iter_results(self, source: bytes | str | IO[bytes], *, name: str | None = None
                     ) -> Iterator[EventResult]:
        """Every located event of a message as it completes, matched or not."""
        exact, local = self.matcher.root_tags()
        match = self.matcher.match_element
        tostring = etree.tostring
        serialize = self.serialize
        n = 0
        for el, tags in cut(source, exact, local, name=name):
            m = match(el, tags)
            if m is None:
                continue
            note = None
            if m.receivers:
                # UTF-8: the default (ASCII) writes non-ASCII names as character
                # references, which are not allowed in names (not well-formed)
                xml = (tostring(el, encoding="UTF-8", xml_declaration=False, with_tail=False)
                       if serialize else b"")
                note = Notification(n, m.targets, m.subscriptions, m.receivers, xml)
            yield EventResult(n, m, note)
            n += 1

    def publish(self, source: bytes | str | IO[bytes], *, name: str | None = None
                ) -> list[Notification]:
        """Notifications for every matched event of a message, in order."""
        return [r.notification for r in self.iter_results(source, name=name)
                if r.notification is not None]

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
