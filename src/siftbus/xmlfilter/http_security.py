"""The security hook of the XML filter's HTTP endpoint, kept apart from the endpoint
itself (:mod:`siftbus.xmlfilter.http`): one ASGI middleware at the HTTP boundary that
authenticates, authorizes and checks callback URLs before a request reaches the app.

``secure_app(create_app(...), guard)`` is all a server needs; on an open guard it returns
the app unchanged. With a secured guard:

* **Authentication.** Every request carries ``Authorization: Bearer <token>`` (a token
  of ``siftbus certs token NAME``); a missing, expired or tampered token is answered
  with 401 and nothing else (no subscription list, no stats, no API description). TLS
  comes from the server (``siftbus xml-filter serve --config --cert --key``).
* **Rights** (the principal's ``services`` patterns, as on the broker):
  ``xml.subscribe`` to register, list, inspect, renew, pause, resume and delete
  subscriptions; ``xml.publish`` for ``POST /publish``; ``xml.stats`` for ``GET /stats``;
  ``xml.types`` to change event types (``PUT``/``DELETE /types/...``); ``xml.admin`` to
  see and act on everyone's subscriptions. Anything else answers 403.
* **Ownership.** A subscription belongs to the principal that registered it: others get
  404 for it (as if it did not exist), and ``GET /subscriptions`` lists one's own.
* **Callback URLs.** Every receiver's ``callbackAddress`` of a registered document (or the
  address it defaults to: ``X-Callback-Address``, else ``http://<client host>/``) must
  start with one of the policy's ``callback_prefixes``; otherwise the whole document is
  refused with 403 before anything is registered, so the server never calls an address
  outside the allow-list.

* **Quotas** are the principal's, from the same policy and counted by the same
  :class:`~siftbus.security.quotas.QuotaUsage` as at a broker: ``max_profiles`` bounds
  the subscriptions it holds (a document that would pass it is refused whole),
  ``publish_rate``/``publish_burst`` the documents it posts to ``/publish`` per second
  (a token bucket; the events inside a document are only known once it is matched).
  Exceeding one answers 429 with the quota named, counted by the guard.
* **A store** (``secure_app(..., store=)``, ``xml-filter serve --store``) keeps the
  documents registered over HTTP and their subscriptions' owners
  (``<store>.owners.json``, :class:`~siftbus.security.owners.OwnersFile`, as the channel
  service keeps its owners; the documents in ``<store>.documents/``): after a restart
  the endpoint registers them again and every ownership check still holds.
* **Certificates** are reloaded without a restart: with the server's
  :class:`~siftbus.security.tls.ContextSet` (``secure_app(..., tls=)``, the uvicorn
  arguments of :func:`uvicorn_tls`) the hook runs ``ContextSet.watch`` for the app's
  lifespan, as the broker and the channel server do; later handshakes get the new
  certificate.

Every refusal is an :class:`~siftbus.errors.AuthenticationError` or
:class:`~siftbus.errors.AccessDenied` counted and logged by the guard; the JSON body is
the endpoint's error shape ``{"error", "type", "line", "column"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from lxml import etree

from siftbus.errors import (
    AccessDenied,
    ConfigError,
    DuplicateSubscriptionError,
    QuotaExceeded,
    SecurityError,
    SiftbusError,
)
from siftbus.security.guard import Guard, check_bind
from siftbus.security.owners import OwnersFile
from siftbus.security.policy import SecurityPolicy
from siftbus.security.principal import Principal
from siftbus.security.tls import RELOAD_INTERVAL, ContextSet, TLSConfig
from siftbus.security.tokens import bearer_token

log = logging.getLogger("siftbus.xmlfilter")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 64 * 1024 * 1024
"""Largest subscription document the hook reads to check its callback addresses."""

_SUB_PATH = re.compile(r"^/subscriptions/([^/]+)(?:/[^/]*)?/?$")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False,
                          remove_comments=True)


def _json(status: int, exc: SiftbusError) -> tuple[int, bytes]:
    return status, json.dumps({"error": str(exc), "type": type(exc).__name__,
                               "line": exc.line, "column": exc.column}).encode()


def _document(body: bytes) -> Any:
    """The root of a subscription document; :class:`~siftbus.errors.AccessDenied` if it
    cannot be read (the hook fails closed: what it cannot check is not registered)."""
    try:
        return etree.fromstring(body, _PARSER)
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise AccessDenied(f"the subscription document cannot be checked: {exc}"[:300],
                           action="subscribe") from None


def subscription_count(root: Any) -> int:
    """How many subscriptions a document (its root) holds."""
    if etree.QName(root).localname == "subscription":
        return 1
    return sum(1 for el in root if isinstance(el.tag, str)
               and etree.QName(el).localname == "subscription")


def callback_addresses(body: bytes | Any, default: str) -> list[str]:
    """The callback addresses a subscription document (its bytes or its root) names
    (``default`` for a receiver without one); :class:`~siftbus.errors.AccessDenied` if
    the document cannot be read."""
    root = _document(body) if isinstance(body, bytes) else body
    out = []
    for el in root.iter():
        if not isinstance(el.tag, str) or etree.QName(el).localname != "receiver":
            continue
        addr = [c for c in el if isinstance(c.tag, str)
                and etree.QName(c).localname == "callbackAddress"]
        text = (addr[0].text or "").strip() if addr else ""
        out.append(text or default)
    if not out and etree.QName(root).localname in ("subscription", "subscriptionList"):
        out.append(default)  # the endpoint refuses it; nothing to call either way
    return out


class XmlAccess:
    """Rights, ownership, quotas and the callback allow-list of one XML endpoint; with a
    ``store``, the registered documents and their owners survive a restart."""

    def __init__(self, guard: Guard, store: str | Path | None = None) -> None:
        self.guard = guard
        self.owners: dict[str, str] = {}
        """Subscription id -> the principal that registered it."""
        self._docs: dict[str, tuple[str, str]] = {}
        """Subscription id -> (its document's file, the default callback address)."""
        self._held: dict[str, str] = {}
        """Subscription id -> owner, for those registered here and still in the filter
        (the quota's count: a removal from the filter, expiry included, leaves it)."""
        self._count: dict[str, int] = {}
        """Principal -> how many of ``_held`` it owns."""
        self._lock = threading.Lock()  # expiry removes from the publishing thread
        self._file = OwnersFile(store, "XML subscription") if store else None
        self._dir = Path(f"{store}.documents") if store else None
        if self._file is not None:
            try:
                for sid, doc, sender, owner in self._file.load():
                    self.owners[str(sid)] = str(owner)
                    self._docs[str(sid)] = (str(doc), str(sender))
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"cannot read the XML subscription owners file: {exc}",
                                  source=str(self._file.path)) from None
            for sid, owner in self.owners.items():  # until ``attach`` counts the filter's
                self._hold(sid, owner)

    # ---- the store -------------------------------------------------------------------------

    def restore(self, filt: Any) -> list[str]:
        """Register the stored documents in ``filt`` again (each with its default
        callback address); returns the ids restored. A document whose subscriptions are
        registered already (``--subscriptions``) is skipped; one that no longer reads is
        logged and left out; subscriptions deleted since are removed again."""
        if self._dir is None:
            return []
        restored: list[str] = []
        for doc, sender in sorted(set(self._docs.values())):
            path = self._dir / doc
            try:
                ids = filt.subscribe_xml(path.read_bytes(), source=str(path),
                                         default_method="HTTP", sender=sender,
                                         freeze=True)  # at start-up, before serving
            except DuplicateSubscriptionError:
                continue
            except (OSError, SiftbusError) as exc:
                log.error("XML endpoint: stored subscriptions %s not restored: %s", path, exc)
                continue
            for sid in ids:
                if sid in self._docs:
                    restored.append(sid)
                else:
                    filt.unsubscribe(sid)  # deleted before the restart
        return restored

    def attach(self, filt: Any) -> None:
        """Count what ``filt`` holds of the owned subscriptions now (after ``restore``),
        and from then on follow its removals."""
        with self._lock:
            self._held.clear()
            self._count.clear()
        for sid, owner in self.owners.items():
            with contextlib.suppress(SiftbusError, KeyError):
                filt.get(sid)
                self._hold(sid, owner)
        filt.on_remove(self._release)

    def _hold(self, sid: str, owner: str) -> None:
        with self._lock:
            if sid not in self._held:
                self._held[sid] = owner
                self._count[owner] = self._count.get(owner, 0) + 1

    def _release(self, sid: str) -> None:
        with self._lock:
            owner = self._held.pop(sid, None)
            if owner is not None:
                left = self._count[owner] - 1
                if left:
                    self._count[owner] = left
                else:
                    del self._count[owner]

    def registered(self, principal: Principal, ids: list[str], body: bytes,
                   sender: str) -> None:
        """Record the owner of newly registered ids (and, with a store, the document)."""
        for sid in ids:
            self._hold(sid, self.owners.setdefault(sid, principal.name))
        if self._dir is None or not ids:
            return
        doc = hashlib.sha256(body).hexdigest()[:32] + ".xml"
        self._dir.mkdir(parents=True, exist_ok=True)
        if not (self._dir / doc).exists():
            tmp = self._dir / (doc + ".tmp")
            tmp.write_bytes(body)
            tmp.replace(self._dir / doc)
        for sid in ids:
            self._docs.setdefault(sid, (doc, sender))
        self._save()

    def deleted(self, sid: str) -> None:
        """Forget a deleted subscription's owner (and its document once unused)."""
        self._release(sid)
        self.owners.pop(sid, None)
        entry = self._docs.pop(sid, None)
        if entry is None or self._dir is None:
            return
        if all(d != entry[0] for d, _ in self._docs.values()):
            with contextlib.suppress(OSError):
                (self._dir / entry[0]).unlink()
        self._save()

    def _save(self) -> None:
        if self._file is not None:
            self._file.save([[sid, doc, sender, self.owners.get(sid, "")]
                             for sid, (doc, sender) in self._docs.items()])

    # ---- quotas ----------------------------------------------------------------------------

    def held(self, principal: Principal) -> int:
        """Subscriptions ``principal`` holds now (expired and deleted ones are no longer
        held); kept as they come and go, not counted per request."""
        return self._count.get(principal.name, 0)

    def charge_subscribe(self, principal: Principal, n: int) -> None:
        """Refuse (counted) a document of ``n`` subscriptions that would pass the
        principal's ``max_profiles``."""
        usage = self.guard.usage(principal)
        if usage.quotas.max_profiles is None:
            return
        usage.profiles = self.held(principal)
        try:
            usage.reserve_profiles(n)
        except QuotaExceeded as exc:
            raise self.guard.refuse(exc, principal.name, "subscribe") from None

    def charge_publish(self, principal: Principal) -> None:
        """Spend the principal's publish rate for one document, or refuse it (counted)."""
        try:
            self.guard.usage(principal).check_publish(1)
        except QuotaExceeded as exc:
            raise self.guard.refuse(exc, principal.name, "publish") from None

    def authenticate(self, headers: dict[str, str], peer: str) -> Principal:
        try:
            token = bearer_token(headers.get("authorization"))
        except SecurityError as exc:
            raise self.guard.refuse(exc, f"?@{peer}", "connect") from None
        return self.guard.client(token, None, peer=peer)

    def need(self, principal: Principal, right: str, what: str) -> None:
        rights = self.guard.rights(principal)
        if not rights.may_call("xml", right):
            try:
                rights.check_call("xml", right)
            except SecurityError as exc:
                raise self.guard.refuse(exc, principal.name, "call", what) from None

    def is_admin(self, principal: Principal) -> bool:
        return self.guard.rights(principal).may_call("xml", "admin")

    def mine(self, principal: Principal, sub_id: str) -> bool:
        return self.is_admin(principal) or self.owners.get(sub_id) == principal.name

    def check_callbacks(self, principal: Principal, addresses: list[str]) -> None:
        for url in addresses:
            self.guard.check_callback(principal, url)


class SecureXmlApp:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, guard: Guard, *, max_body: int = MAX_BODY,
                 tls: ContextSet | None = None,
                 reload_interval: float = RELOAD_INTERVAL,
                 store: str | Path | None = None) -> None:
        self.app = app
        self.filter = getattr(getattr(app, "state", None), "filter", None)
        """The endpoint's filter (``create_app``'s), for what the hook restores and
        counts; ``None`` for another app."""
        self.access = XmlAccess(guard, store)
        if self.filter is not None:
            self.access.restore(self.filter)
            self.access.attach(self.filter)
        self.max_body = max_body
        self.tls = tls
        self.reload_interval = reload_interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.tls is not None:
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        client = scope.get("client") or ("localhost", 0)
        method, path = scope["method"], scope["path"]
        try:
            principal = self.access.authenticate(headers, str(client[0]))
        except SecurityError as exc:
            await self._answer(send, *_json(401, exc))
            return
        try:
            route = self._authorize(principal, method, path)
        except SecurityError as exc:
            await self._answer(send, *_json(403, exc))
            return
        if route == "hidden":
            await self._answer(send, 404, json.dumps({
                "error": f"no subscription {path.split('/')[2][:100]!r}",
                "type": "UnknownSubscriptionError", "line": None, "column": None}).encode())
            return
        if route == "publish":
            try:
                self.access.charge_publish(principal)
            except QuotaExceeded as exc:
                await self._answer(send, *_json(429, exc))
                return
            if not self.access.is_admin(principal):  # others' subscriptions stay unseen
                await self.app(scope, receive, self._capture(send, principal, "publish"))
                return
        if route == "register":
            body = await self._body(receive)
            if body is None:
                await self._answer(send, 413, b'{"error": "body too large", "type": '
                                   b'"BodyTooLargeError", "line": null, "column": null}')
                return
            default = headers.get("x-callback-address") or f"http://{client[0]}/"
            try:
                root = _document(body)
                self.access.check_callbacks(principal, callback_addresses(root, default))
                self.access.charge_subscribe(principal, subscription_count(root))
            except QuotaExceeded as exc:
                await self._answer(send, *_json(429, exc))
                return
            except SecurityError as exc:
                if not isinstance(exc, AccessDenied) or not exc.principal:
                    self.access.guard.refuse(exc, principal.name, "subscribe")
                await self._answer(send, *_json(403, exc))
                return
            await self.app(scope, _replay(body, receive),
                           self._capture(send, principal, "register", body, default))
            return
        if route == "list" and not self.access.is_admin(principal):
            await self.app(scope, receive, self._capture(send, principal, "list"))
            return
        if route == "own" and method == "DELETE":
            await self.app(scope, receive, self._capture(send, principal, "delete"))
            return
        await self.app(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app's lifespan, with the certificate watcher running through it."""
        assert self.tls is not None
        watcher = asyncio.ensure_future(self.tls.watch("XML endpoint", self.reload_interval))
        try:
            await self.app(scope, receive, send)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    def _authorize(self, principal: Principal, method: str, path: str) -> str:
        """The route's kind after checking the right it needs."""
        a = self.access
        if path.rstrip("/") == "/subscriptions":
            a.need(principal, "subscribe", "xml.subscribe")
            return "register" if method == "POST" else "list"
        m = _SUB_PATH.match(path)
        if m:
            a.need(principal, "subscribe", "xml.subscribe")
            sub_id = m.group(1)
            if a.mine(principal, sub_id):
                return "own"
            if sub_id in a.owners:  # someone else's: counted, answered as unknown
                a.guard.refuse(AccessDenied(
                    f"{principal.name} may not {method} subscription {sub_id[:100]!r}: it "
                    "belongs to another principal", principal=principal.name,
                    action="call", object=f"xml.subscribe {sub_id[:100]}"))
            return "hidden"
        if path.rstrip("/") == "/publish":
            a.need(principal, "publish", "xml.publish")
            return "publish"
        if path.rstrip("/") == "/stats":
            a.need(principal, "stats", "xml.stats")
            return "stats"
        if path.startswith("/types"):
            if method in ("GET", "HEAD"):
                a.need(principal, "subscribe", "xml.subscribe")
            else:
                a.need(principal, "types", "xml.types")
            return "types"
        a.need(principal, "admin", "xml.admin")  # API descriptions and anything new
        return "other"

    async def _body(self, receive: Receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not msg.get("more_body"):
                break
        return b"".join(chunks)

    def _capture(self, send: Send, principal: Principal, kind: str, doc: bytes = b"",
                 sender: str = "") -> Send:
        """Record the owner of registered ids, or cut a list down to the caller's."""
        start: dict[str, Any] = {}
        parts: list[bytes] = []

        async def wrapped(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                start.update(msg)
                return
            if msg["type"] != "http.response.body":
                await send(msg)
                return
            parts.append(msg.get("body", b""))
            if msg.get("more_body"):
                return
            body = b"".join(parts)
            if start.get("status") in (200, 201):
                body = self._rewrite(body, principal, kind, doc, sender)
            hdrs = [(k, v) for k, v in start.get("headers", [])
                    if k.lower() != b"content-length"]
            hdrs.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": hdrs})
            await send({"type": "http.response.body", "body": body})

        return wrapped

    def _rewrite(self, body: bytes, principal: Principal, kind: str, doc: bytes,
                 sender: str) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body
        if not isinstance(data, dict):
            return body
        if kind == "register":
            self.access.registered(principal, [str(i) for i in data.get("ids", [])], doc,
                                   sender)
            return body
        if kind == "delete":
            self.access.deleted(str(data.get("id")))
            return body
        if kind == "publish":
            data["notifications"] = self._own_notifications(data.get("notifications"),
                                                            principal)
            return json.dumps(data).encode()
        for key, value in data.items():  # every list of ids: only the caller's
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                data[key] = [v for v in value if self.access.owners.get(v) == principal.name]
        return json.dumps(data).encode()

    def _own_notifications(self, notes: Any, principal: Principal) -> list[Any]:
        """A publisher's view of what its document caused: only the notifications of
        its own subscriptions, naming only those; callbacks only where every
        subscription of the notification is its own (a receiver is not its to see
        otherwise)."""
        owners = self.access.owners
        out = []
        for n in notes if isinstance(notes, list) else ():
            subs = n.get("subscriptions") if isinstance(n, dict) else None
            if not isinstance(subs, list):
                continue
            own = [s for s in subs if owners.get(s) == principal.name]
            if own:
                out.append({**n, "subscriptions": own,
                            "receivers": n.get("receivers", []) if len(own) == len(subs)
                            else []})
        return out

    @staticmethod
    async def _answer(send: Send, status: int, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then the connection's own messages (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def server_security(policy: SecurityPolicy, cert: Path | None, key: Path | None, *,
                    host: str, insecure: bool) -> tuple[Guard, ContextSet | None]:
    """The guard and the TLS contexts (``None``: plain HTTP) of an XML endpoint under
    ``policy``, after the safe-default check of its bind address (loopback only without
    TLS and authentication, unless ``insecure``). Serve with :func:`uvicorn_tls` of the
    contexts and ``secure_app(..., tls=)``, which reloads replaced certificates."""
    if (cert is None) != (key is None):
        raise ConfigError("--cert and --key go together", field="cert")
    if cert is not None and policy.ca is None:
        raise ConfigError("--cert/--key need --config with a [security] ca (the CA that "
                          "signed them, which clients trust)", field="cert")
    if policy.ca is not None and cert is None:
        raise ConfigError("[security] has a ca: the XML endpoint needs --cert and --key "
                          "(siftbus certs issue NAME)", field="cert")
    tls: ContextSet | None = None
    if cert is not None and key is not None and policy.ca is not None:
        tls = ContextSet(TLSConfig(cert, key, policy.ca))
    check_bind(host, tls=tls is not None, authenticated=policy.authenticates,
               insecure=insecure, what="XML endpoint")
    return Guard(policy), tls


def uvicorn_tls(tls: ContextSet | None) -> dict[str, Any]:
    """uvicorn's keyword arguments for serving HTTPS from ``tls``'s live server context
    (the one ``ContextSet.watch`` reloads in place); ``{}`` for plain HTTP."""
    if tls is None or tls.server is None:
        return {}
    server = tls.server
    return {"ssl_certfile": str(tls.config.cert), "ssl_keyfile": str(tls.config.key),
            "ssl_context_factory": lambda _config, _default: server}


def secure_app(app: Any, guard: Guard, *, max_body: int = MAX_BODY,
               tls: ContextSet | None = None, store: str | Path | None = None) -> Any:
    """``app`` behind the security hook (``app`` itself when ``guard`` is open). The
    hook's state is reachable as ``returned.access`` (owners, the guard's counters);
    with ``tls`` it reloads replaced certificates for the app's lifespan; with
    ``store`` the registered documents and their owners survive a restart."""
    if guard.open:
        return app
    return SecureXmlApp(app, guard, max_body=max_body, tls=tls, store=store)


__all__ = ["SecureXmlApp", "XmlAccess", "callback_addresses", "secure_app", "server_security",
           "subscription_count", "uvicorn_tls"]
