"""The MQTT bridge: a client of one siftbus broker and of one MQTT broker (``docs/mqtt.md``).

Ingress: every ``[[mqtt.ingress]]`` topic is subscribed with QoS 1; a message becomes an
event by its rule (:mod:`.mqtt_config`), is validated like any publication, and is
acknowledged to the MQTT broker only after the siftbus broker has routed it (a bad payload
is counted, logged and acknowledged: it can never become valid). Egress: the bridge holds
a siftbus *session*; each notification is published with QoS 1 to
``{notify}/{subscriber}/{profile}`` and its session row is acknowledged to the siftbus
broker only once the MQTT broker has acknowledged every notification of the row. Both
MQTT session and siftbus session survive the bridge, so a crash loses nothing
acknowledged; what was in flight then comes again (at least once).

paho-mqtt runs its network loop in a thread of its own; its callbacks only hand their
arguments to the asyncio loop (``call_soon_threadsafe``), where all state lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from siftbus.broker.config import NetworkConfig
from siftbus.client import Client, Notification
from siftbus.client.session import SessionState
from siftbus.errors import (
    ConnectionLostError,
    EnvironmentProblem,
    EventError,
    RemoteError,
    SiftbusError,
)
from siftbus.model.textio import parse_json_line

from .mqtt_config import MqttSettings, event_object
from .payloads import PAYLOADS
from .registrations import Registration, parse_control

log = logging.getLogger("siftbus.bridge.mqtt")

MAX_INGRESS_BATCH = 1000
"""MQTT messages published to siftbus in one acknowledged batch at most."""
MAX_OUTSTANDING = 10_000
"""Notifications handed to the MQTT client and not yet acknowledged by its broker, at
most (the rest wait in the bridge, bounded by the session's in-flight window)."""
INGRESS_WINDOW = 4
"""Ingress batches published and not yet acknowledged by the broker, at most."""
RECONNECT_MAX = 5.0
"""Seconds between attempts to reach the siftbus broker again, at most."""


@dataclass(frozen=True, slots=True)
class BridgeStats:
    """What the bridge has done since it started."""

    received: int = 0
    """MQTT messages taken from the ingress topics."""
    published: int = 0
    """Events published into siftbus (routed by the broker)."""
    rejected: int = 0
    """Ingress messages refused (bad JSON, not an event of the schema, refused by the
    broker); each is logged and acknowledged."""
    unmapped: int = 0
    """Ingress messages on a topic no rule maps."""
    notified: int = 0
    """Notifications handed to the MQTT client (QoS 1)."""
    delivered: int = 0
    """Notifications the MQTT broker has acknowledged."""
    orphaned: int = 0
    """Notifications for a profile no control message registers any more (dropped)."""
    registered: int = 0
    """Profiles subscribed at the broker for control messages."""
    refused: int = 0
    """Control messages refused (bad names, bad profile)."""
    mqtt_connects: int = 0
    broker_connects: int = 0


class MqttBridge:
    """Bridge broker ``broker`` of ``net`` and the MQTT broker at ``mqtt``."""

    def __init__(self, net: NetworkConfig, broker: str, mqtt: tuple[str, int],
                 settings: MqttSettings, *, token: str | None = None,
                 timeout: float = 10.0) -> None:
        net.broker(broker)  # an unknown name fails here
        self.net, self.broker, self.mqtt, self.settings = net, broker, mqtt, settings
        self.token, self.timeout = token, timeout
        self.client_id = settings.client_id.replace("{broker}", broker)
        self.counts: Counter[str] = Counter()
        self.client: Client | None = None
        """The session connection: profiles and notifications."""
        self.publisher: Client | None = None
        """A connection without session for ingress (a session publisher's numbers
        would have to continue across a crash: a plain connection has a fresh name)."""
        self.session = SessionState(self.client_id, auto_ack=False)
        self.regs: dict[tuple[str, str], Registration] = {}
        self.by_pid: dict[str, Registration] = {}
        self.refused: dict[str, str] = {}
        """Profile id -> why the broker refused it (not tried again)."""
        self.active: set[str] = set()
        """Profile ids subscribed at the broker (restored or subscribed here)."""
        self.synced = asyncio.Event()
        """Set once every retained control message has been read (after a connect)."""
        self.ready = asyncio.Event()
        """Set while the broker connection is up."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._mqtt: paho.Client | None = None
        self._mqtt_up = asyncio.Event()
        self._sync_token = ""
        self._ingress: asyncio.Queue[paho.MQTTMessage] = asyncio.Queue()
        self._mids: dict[int, int] = {}
        """MQTT message id of a notification -> its session number."""
        self._pending: Counter[int] = Counter()
        """Session number -> notifications of that row not yet acknowledged by MQTT."""
        self._backlog: deque[tuple[str, bytes, int]] = deque()
        """Notifications waiting for room among the MQTT client's outstanding ones."""
        self._retry_scheduled = False
        self._handed = 0
        """The highest session number taken from the broker."""
        self._acked = 0
        self._ack_scheduled = False
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._closed = False

    @property
    def stats(self) -> BridgeStats:
        return BridgeStats(**{f.name: self.counts[f.name] for f in fields(BridgeStats)})

    @property
    def sync_topic(self) -> str:
        return f"{self.settings.control}-sync/{self.client_id}"

    @property
    def status_topic(self) -> str:
        """Retained ``online`` while the bridge runs (removed when it stops or dies)."""
        return f"{self.settings.status}/{self.client_id}"

    # ---- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to both sides (the MQTT broker within ``timeout``), read the control
        topic, subscribe the registered profiles, and start bridging."""
        self._loop = asyncio.get_running_loop()
        m = paho.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        clean_session=False, manual_ack=True)
        m.max_inflight_messages_set(1000)
        m.reconnect_delay_set(1, int(RECONNECT_MAX))
        m.on_connect = self._t_connect
        m.on_disconnect = self._t_disconnect
        m.on_message = self._t_message
        m.on_publish = self._t_publish
        m.will_set(self.status_topic, b"", qos=1, retain=True)  # a dead bridge: no status
        self._mqtt = m
        host, port = self.mqtt
        try:
            m.connect_async(host, port, keepalive=self.settings.keepalive)
        except (OSError, ValueError) as exc:
            raise EnvironmentProblem(f"MQTT broker {host}:{port}: {exc}") from None
        m.loop_start()
        try:
            async with asyncio.timeout(self.timeout):
                await self._mqtt_up.wait()
                await self.synced.wait()
        except TimeoutError:
            await self.close()
            raise ConnectionLostError(f"MQTT broker at {host}:{port} did not answer within "
                                      f"{self.timeout:g} s") from None
        try:
            async with asyncio.timeout(self.timeout):
                while True:  # a broker started at the same time may not listen yet
                    try:
                        await self._connect_broker()
                        break
                    except (ConnectionLostError, OSError):
                        await asyncio.sleep(0.2)
        except TimeoutError:
            await self.close()
            b = self.net.broker(self.broker)
            raise ConnectionLostError(f"broker {self.broker} at {b.host}:{b.port} did not "
                                      f"answer within {self.timeout:g} s") from None
        except BaseException:
            await self.close()
            raise
        assert self.client is not None
        await self._reconcile(self.client)  # the registered profiles, before any event
        self._tasks = [asyncio.ensure_future(f()) for f in
                       (self._ingress_loop, self._reconcile_loop, self._watch_broker)]
        m.publish(self.status_topic, b"online", qos=1, retain=True)

    async def close(self) -> None:
        """Stop both sides (what is in flight comes again after a restart)."""
        if self._closed:
            return
        self._closed = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._mqtt is not None:
            if self._mqtt.is_connected():
                info = self._mqtt.publish(self.status_topic, b"", qos=1, retain=True)
                with contextlib.suppress(RuntimeError, ValueError):  # gone meanwhile
                    await asyncio.to_thread(info.wait_for_publish, 2)
            self._mqtt.disconnect()
            await asyncio.to_thread(self._mqtt.loop_stop)
        for c in (self.client, self.publisher):
            if c is not None:
                await c.close()
        self.ready.clear()

    async def __aenter__(self) -> MqttBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- paho's thread: hand everything to the loop ---------------------------------------

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(fn, *args)

    def _t_connect(self, _c: Any, _u: Any, _flags: Any, reason: Any, _p: Any) -> None:
        self._call(self._on_connect, reason)

    def _t_disconnect(self, _c: Any, _u: Any, _flags: Any, reason: Any, _p: Any) -> None:
        self._call(self._on_disconnect, reason)

    def _t_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        self._call(self._on_message, msg)

    def _t_publish(self, _c: Any, _u: Any, mid: int, _reason: Any, _p: Any) -> None:
        self._call(self._on_puback, mid)

    # ---- MQTT side -----------------------------------------------------------------------

    def _on_connect(self, reason: Any) -> None:
        m = self._mqtt
        if m is None or reason.is_failure:
            log.warning("MQTT broker %s:%s refused the connection: %s", *self.mqtt, reason)
            return
        self.counts["mqtt_connects"] += 1
        filters = [(self.settings.control_filter(), 1), (self.sync_topic, 1)]
        filters += [(f, 1) for f in dict.fromkeys(r.filter for r in self.settings.ingress)]
        m.subscribe(filters)
        # retained control messages come right after the SUBACK, before this marker
        self._sync_token = secrets.token_hex(8)
        self.synced.clear()
        m.publish(self.sync_topic, self._sync_token, qos=1)
        self._mqtt_up.set()

    def _on_disconnect(self, reason: Any) -> None:
        if not self._closed:
            log.warning("MQTT broker %s:%s connection lost (%s); reconnecting", *self.mqtt,
                        reason)

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        topic = msg.topic
        if topic == self.sync_topic:
            self._mqtt_ack(msg)
            if msg.payload.decode("ascii", "replace") == self._sync_token:
                self.synced.set()
                self._dirty.set()
            return
        names = self.settings.control_names(topic)
        if names is not None:
            self._mqtt_ack(msg)  # a retained message is state: it stays at the MQTT broker
            self._on_control(*names, bytes(msg.payload))
            return
        self.counts["received"] += 1
        self._ingress.put_nowait(msg)

    def _mqtt_ack(self, msg: paho.MQTTMessage) -> None:
        if self._mqtt is not None and msg.qos > 0:
            self._mqtt.ack(msg.mid, msg.qos)

    def _on_control(self, subscriber: str, profile: str, payload: bytes) -> None:
        try:
            reg = parse_control(subscriber, profile, payload)
        except SiftbusError as exc:
            self.counts["refused"] += 1
            log.warning("control %s/%s refused: %s", subscriber, profile, exc)
            return
        old = self.regs.pop((subscriber, profile), None)
        if old is not None:
            self.by_pid.pop(old.pid, None)
        if reg is not None:
            self.regs[(subscriber, profile)] = reg
            self.by_pid[reg.pid] = reg
        self._dirty.set()

    # ---- the broker side ---------------------------------------------------------------------

    async def _connect_broker(self) -> None:
        """Connect (or reconnect) the session to the broker."""
        b = self.net.broker(self.broker)
        # The HELLO acknowledges the session's ``last``: only rows the MQTT broker has
        # acknowledged. Rows taken but still in the MQTT client's queue come again and are
        # skipped (``last`` restored below, before the reader runs): paho delivers them.
        self.session.last = self._acked
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                # reconnect=False: the bridge reconnects itself, with the session's
                # acknowledged ``last`` set above (a client's own reconnection would not)
                c = await Client.connect(b.host, b.port, timeout=self.timeout,
                                         token=self.token, tls=None, session=self.session,
                                         reconnect=False)
                break
            except RemoteError as exc:
                # the session's previous connection may still be closing at the broker
                if "already connected" not in exc.message or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        self.session.last = max(self.session.last, self._handed)
        c.unclaimed_callback = self._on_note  # before any await: resent rows come first
        self.client = c
        try:
            self.publisher = await Client.connect(b.host, b.port, timeout=self.timeout,
                                                  token=self.token, tls=None, reconnect=False)
        except BaseException:
            await c.close()
            raise
        self.active = set(c.restored)
        self.counts["broker_connects"] += 1
        log.info("broker %s: session %s %s, %d profiles restored", self.broker,
                 self.client_id, self.session.status, len(c.restored))
        self.ready.set()
        self._dirty.set()
        self._schedule_ack()

    async def _watch_broker(self) -> None:
        """Reconnect to the broker whenever the connection is lost."""
        delay = 0.1
        while True:
            c, p = self.client, self.publisher
            assert c is not None and p is not None
            lost = [asyncio.ensure_future(x.ended.wait()) for x in (c, p)]
            try:
                await asyncio.wait(lost, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in lost:
                    t.cancel()
            self.ready.clear()
            log.warning("broker %s connection lost; reconnecting", self.broker)
            await c.close()
            await p.close()
            while True:
                try:
                    await self._connect_broker()
                    delay = 0.1
                    break
                except (SiftbusError, OSError, TimeoutError) as exc:
                    log.warning("broker %s: %s (again in %.1f s)", self.broker, exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_MAX)

    async def _reconcile_loop(self) -> None:
        """Make the broker's profiles those the control topic registers."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self.ready.wait()
            c = self.client
            assert c is not None
            try:
                await self._reconcile(c)
            except (ConnectionLostError, TimeoutError, ConnectionError):
                self._dirty.set()  # after the reconnect

    async def _reconcile(self, c: Client) -> None:
        for pid, reg in list(self.by_pid.items()):
            if pid in self.active or pid in self.refused:
                continue
            try:
                await c.subscribe(c.profile(reg.text, id=pid), self._on_note, id=pid)
            except (ConnectionLostError, TimeoutError, ConnectionError):
                raise
            except SiftbusError as exc:
                self.refused[pid] = str(exc)
                self.counts["refused"] += 1
                log.warning("profile %s/%s refused: %s", reg.subscriber, reg.profile, exc)
                continue
            self.active.add(pid)
            self.counts["registered"] += 1
            log.info("profile %s/%s subscribed: %s", reg.subscriber, reg.profile, reg.text)
        if not self.synced.is_set():
            return  # some registrations may not have been read yet
        stale = [p for p in self.active if p not in self.by_pid]
        if stale:
            await c.unsubscribe(*stale)
            self.active.difference_update(stale)

    # ---- ingress -------------------------------------------------------------------------------

    async def _ingress_loop(self) -> None:
        """Batches of waiting messages, up to :data:`INGRESS_WINDOW` of them on their way
        at once (one connection keeps their order; each is acknowledged when routed)."""
        window = asyncio.Semaphore(INGRESS_WINDOW)
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                batch = [await self._ingress.get()]
                while len(batch) < MAX_INGRESS_BATCH and not self._ingress.empty():
                    batch.append(self._ingress.get_nowait())
                await window.acquire()
                t = asyncio.ensure_future(self._publish(batch))
                running.add(t)
                t.add_done_callback(running.discard)
                t.add_done_callback(lambda _: window.release())
        finally:
            for t in running:
                t.cancel()

    async def _publish(self, batch: list[paho.MQTTMessage]) -> None:
        """Publish the valid messages of ``batch`` and acknowledge all of it once routed."""
        while True:
            await self.ready.wait()
            c = self.publisher
            assert c is not None and c.schema is not None
            events, good = [], []
            for msg in batch:
                try:
                    events.append(c.event(self._event(msg)))
                    good.append(msg)
                except SiftbusError as exc:
                    self.counts["rejected"] += 1
                    log.warning("MQTT message on %s rejected: %s", msg.topic, exc)
                    self._mqtt_ack(msg)
                except Exception:  # a defect: logged in full; the bridge goes on
                    self.counts["rejected"] += 1
                    log.exception("MQTT message on %s could not be read", msg.topic)
                    self._mqtt_ack(msg)
            batch = good
            if not events:
                return
            try:
                await c.publish_batch(events, ack=True)
            except (ConnectionLostError, ConnectionError, TimeoutError):
                continue  # after the reconnect, again (at least once)
            except RemoteError as exc:
                self.counts["rejected"] += len(batch)
                log.warning("broker refused %d MQTT messages: %s", len(batch), exc)
            else:
                self.counts["published"] += len(batch)
                log.debug("published %d events", len(batch))
            for msg in batch:
                self._mqtt_ack(msg)
            return

    def _event(self, msg: paho.MQTTMessage) -> dict[str, Any]:
        rule = self.settings.rule_for(msg.topic)
        if rule is None:
            self.counts["unmapped"] += 1
            raise EventError(f"no [[mqtt.ingress]] rule maps topic {msg.topic!r}")
        try:
            text = msg.payload.decode("utf-8")
        except UnicodeDecodeError:
            raise EventError("payload is not UTF-8") from None
        payload = parse_json_line(text, source=msg.topic, kind=EventError, decimals=True,
                                  unique_keys=True)
        return event_object(rule, msg.topic, payload)

    # ---- egress ------------------------------------------------------------------------------

    def _on_note(self, n: Notification) -> None:
        """One notification of the session: queued for MQTT (QoS 1), its row remembered
        until the MQTT broker has acknowledged it."""
        number = self.session.numbers.get((n.src, n.seq), 0)
        self._handed = max(self._handed, number)
        reg = self.by_pid.get(n.profile)
        if reg is None:
            self.counts["orphaned"] += 1
            self._schedule_ack()
            return
        payload = PAYLOADS[reg.format](reg, n, number)
        self._pending[number] += 1
        self._backlog.append((self.settings.notify_topic(reg.subscriber, reg.profile),
                              payload, number))
        self._pump()

    def _pump(self) -> None:
        """Hand queued notifications to the MQTT client while fewer than
        :data:`MAX_OUTSTANDING` wait for their PUBACK (MQTT message ids are 16 bits: an
        unbounded number in flight would reuse an id still in use). One the client
        refuses stays queued and is tried again: nothing is acknowledged unsent."""
        m = self._mqtt
        while m is not None and self._backlog and len(self._mids) < MAX_OUTSTANDING:
            topic, payload, number = self._backlog[0]
            info = m.publish(topic, payload, qos=1)
            if info.rc not in (paho.MQTT_ERR_SUCCESS, paho.MQTT_ERR_NO_CONN):
                log.warning("MQTT client refused a notification (%s); again in 0.1 s",
                            paho.error_string(info.rc))
                if self._loop is not None and not self._retry_scheduled:
                    self._retry_scheduled = True
                    self._loop.call_later(0.1, self._retry)
                return
            self._backlog.popleft()
            self.counts["notified"] += 1
            self._mids[info.mid] = number

    def _retry(self) -> None:
        self._retry_scheduled = False
        self._pump()

    def _on_puback(self, mid: int) -> None:
        number = self._mids.pop(mid, None)
        if number is None:
            return  # the sync marker, the status
        self.counts["delivered"] += 1
        self._pending[number] -= 1
        if self._pending[number] <= 0:
            del self._pending[number]
        self._schedule_ack()
        self._pump()

    def _schedule_ack(self) -> None:
        if not self._ack_scheduled and self._loop is not None:
            self._ack_scheduled = True
            self._loop.call_soon(self._send_ack)

    def _send_ack(self) -> None:
        """Acknowledge the session rows below the first one still waiting for MQTT."""
        self._ack_scheduled = False
        upto = min(self._pending) - 1 if self._pending else self._handed
        c = self.client
        if upto > self._acked and c is not None and self.ready.is_set():
            with contextlib.suppress(ConnectionError, SiftbusError, AssertionError):
                c.ack_nowait(upto)
                self._acked = upto



__all__ = ["BridgeStats", "MqttBridge"]
