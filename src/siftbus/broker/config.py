"""The network config: one TOML file describing the overlay tree and its protocol.

::

    [network]
    schema = "schema.toml"        # relative to this file
    protocol = "forwarding"       # flooding | forwarding | rendezvous
    strategy = "covering"         # simple | identity | covering | merging
    imperfect = false             # merging: also merge imperfectly (false positives filtered)
    advertisements = false        # forwarding: subscriptions follow advertisements
    engine = "index"              # matcher engine (default: index when installed)
    handoff = "acyclic"           # pingpong | acyclic | rendezvous (docs/mobility.md)

    [network.sessions]            # optional: session limits (docs/mobility.md)
    max_count = 100000
    expiry = 3600.0

    [network.limits]              # optional: what one peer may send (docs/broker.md, Limits)
    max_frame = 16777216
    frame_timeout = 30.0

    [network.retained]            # optional: retained state per broker (docs/temporal.md)
    max_per_client = 10000

    [network.composite]           # optional: composite profiles (docs/composite.md, Limits)
    lateness = 2.0                # seconds an event may arrive late and still count
    clock = true                  # the brokers' clocks move the watermark

    [network.rendezvous]          # rendezvous: the RN of each event type (default: first broker)
    Temperature = "B2"

    [brokers.B1]
    host = "127.0.0.1"
    port = 7401
    neighbours = ["B2"]
    store = "b1.sqlite"           # optional: durable subscriptions of local clients
    cert = "certs/B1.pem"         # with [security] ca: the broker's certificate and key
    key = "certs/B1.key"
    metrics_port = 9401           # optional: Prometheus metrics at http://host:9401/metrics

    [security]                    # optional: TLS, principals, rights, quotas
    ca = "certs/ca.pem"           # (docs/security.md; siftbus.security.policy)

The neighbour relation is symmetric (listing an edge on one side is enough) and must
form a tree. A broker dials the neighbours declared before it and accepts the others.
Without a ``[security]`` section the network is open and its brokers listen on loopback
addresses only (``--insecure`` overrides that, loudly).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from siftbus.errors import ConfigError, SiftbusError
from siftbus.match.engines import ENGINES
from siftbus.model import Schema, load_schema
from siftbus.model.textio import parse_toml, read_text, split_lines
from siftbus.security.guard import Guard
from siftbus.security.policy import OPEN, SecurityPolicy
from siftbus.security.tls import ContextSet
from siftbus.wire.limits import DEFAULT_LIMITS, MAX_FRAME, Limits

from .composite import COMPOSITE_DEFAULTS, CompositeSettings
from .handoff import HANDOFFS
from .handoff_base import check_claims
from .node import BrokerNode, check_name, default_engine
from .protocols import PROTOCOLS, STRATEGIES, rendezvous_directions
from .retained import DEFAULT_RETAINED_LIMITS, RetainedLimits
from .server import BrokerServer
from .sessions import DEFAULT_POLICY, SessionPolicy
from .store import ProfileStore


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker of the network."""

    name: str
    host: str
    port: int
    neighbours: tuple[str, ...]
    store: Path | None
    cert: Path | None = None
    """The broker's TLS certificate (its common name is the broker's name)."""
    key: Path | None = None
    metrics_port: int | None = None
    """Where the broker serves its Prometheus metrics (on its host), if anywhere."""


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """A validated network config."""

    path: Path | None
    schema: Schema
    protocol: str
    strategy: str
    imperfect: bool
    advertisements: bool
    engine: str
    max_frame: int
    rendezvous: Mapping[str, str]
    brokers: Mapping[str, BrokerConfig]
    edges: tuple[tuple[str, str], ...]
    limits: Limits = DEFAULT_LIMITS
    """What every broker of the network accepts from one peer (``[network.limits]``)."""
    composite: CompositeSettings = COMPOSITE_DEFAULTS
    """How the brokers evaluate composite profiles (``[network.composite]``)."""
    security: SecurityPolicy = OPEN
    """Who may connect and do what (``[security]``; open when absent)."""
    retained: RetainedLimits = DEFAULT_RETAINED_LIMITS
    """What every broker holds of retained state (``[network.retained]``)."""
    handoff: str | None = None
    """The session handoff protocol (``None``: the routing's default)."""
    sessions: SessionPolicy = DEFAULT_POLICY
    """Session limits and timings (``[network.sessions]``)."""

    def broker(self, name: str) -> BrokerConfig:
        try:
            return self.brokers[name]
        except KeyError:
            raise ConfigError(f"no broker {name!r} in the config (have "
                              f"{', '.join(self.brokers)})", source=_src(self.path),
                              field="name") from None

    def node(self, name: str) -> BrokerNode:
        """A fresh broker node for ``name`` (with its durable store, if configured, and
        a guard applying the network's security policy)."""
        b = self.broker(name)
        dirs = (rendezvous_directions(self.edges, name, dict(self.rendezvous))
                if self.protocol == "rendezvous" else None)
        node = BrokerNode(name, self.schema, protocol=self.protocol, strategy=self.strategy,
                          imperfect=self.imperfect, advertisements=self.advertisements,
                          neighbours=b.neighbours, rendezvous=dirs, engine=self.engine,
                          store=ProfileStore(b.store) if b.store else None,
                          guard=Guard(self.security), handoff=self.handoff,
                          sessions=self.sessions, edges=self.edges,
                          composite=self.composite)
        node.retained.limits = self.retained
        return node

    def tls(self, name: str) -> ContextSet | None:
        """The TLS contexts of broker ``name`` (``None`` without a ``[security]`` ca)."""
        b = self.broker(name)
        cfg = self.security.tls(b.cert, b.key)
        return ContextSet(cfg) if cfg is not None else None

    def server(self, name: str, *, insecure: bool = False) -> BrokerServer:
        """The server for ``name``: listens on its port, dials earlier neighbours."""
        b = self.broker(name)
        order = list(self.brokers)
        dial = {n: (self.brokers[n].host, self.brokers[n].port) for n in b.neighbours
                if order.index(n) < order.index(name)}
        return BrokerServer(self.node(name), b.host, b.port, dial=dial, limits=self.limits,
                            tls=self.tls(name), insecure=insecure)


def _src(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _line_of(text: str, needle: str) -> int | None:
    for i, line in split_lines(text):
        if needle in line:
            return i
    return None


def parse_network(text: str, *, path: Path | None = None,
                  schema: Schema | None = None) -> NetworkConfig:
    """Parse and validate config text; errors carry the file and line."""
    src = _src(path)
    data = parse_toml(text, source=src, kind=ConfigError)  # bounded nesting, located errors

    def fail(msg: str, needle: str, field: str | None = None) -> ConfigError:
        return ConfigError(msg, source=src, line=_line_of(text, needle), field=field)

    unknown_top = set(data) - {"network", "brokers", "security", "mqtt"}  # mqtt: the bridge's
    if unknown_top:
        key = sorted(unknown_top)[0]
        raise fail(f"unknown table [{key}] (allowed: network, brokers, security, mqtt)", key,
                   key)
    net = data.get("network", {})
    if not isinstance(net, dict):
        raise fail("[network] must be a table", "network")
    unknown = set(net) - {"schema", "protocol", "strategy", "imperfect", "advertisements",
                          "engine", "max_frame", "rendezvous", "limits", "retained",
                          "handoff", "sessions", "composite"}
    if unknown:
        key = sorted(unknown)[0]
        raise fail(f"unknown [network] key {key!r}", key, key)
    if schema is None:
        sp = net.get("schema")
        if not isinstance(sp, str):
            raise fail('[network] needs schema = "file.toml"', "[network]", "schema")
        base = path.parent if path is not None else Path.cwd()
        try:
            schema = load_schema(base / sp)
        except SiftbusError as exc:
            raise fail(f"schema: {exc}", "schema", "schema") from None
    protocol = net.get("protocol", "forwarding")
    if protocol not in PROTOCOLS:
        raise fail(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}",
                   "protocol", "protocol")
    strategy = net.get("strategy", "covering")
    if strategy not in STRATEGIES:
        raise fail(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}",
                   "strategy", "strategy")
    engine = net.get("engine") or default_engine()
    if engine not in ENGINES:
        raise fail(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}", "engine",
                   "engine")
    flags: dict[str, bool] = {}
    for key in ("imperfect", "advertisements"):
        v = net.get(key, False)
        if not isinstance(v, bool):
            raise fail(f"{key} must be true or false", key, key)
        flags[key] = v
    if flags["advertisements"] and protocol != "forwarding":
        raise fail("advertisements apply to protocol = \"forwarding\" only", "advertisements",
                   "advertisements")
    max_frame = net.get("max_frame", MAX_FRAME)
    if not isinstance(max_frame, int) or max_frame < 1024:
        raise fail("max_frame must be an integer >= 1024", "max_frame", "max_frame")
    limits = _parse_limits(net, fail)
    retained = _parse_retained(net, fail)
    handoff, policy = _parse_sessions(net, protocol, strategy, fail)

    raw = data.get("brokers")
    if not isinstance(raw, dict) or not raw:
        raise fail("the config needs at least one [brokers.NAME] table", "brokers", "brokers")
    nbrs: dict[str, set[str]] = {}
    brokers_raw: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise fail(f"brokers.{name} must be a table", f"{name}", name)
        try:
            check_name(name, "broker")
        except ConfigError as exc:
            raise fail(exc.message, f"[brokers.{name}", name) from None
        bad = set(table) - {"host", "port", "neighbours", "store", "cert", "key",
                            "metrics_port"}
        if bad:
            key = sorted(bad)[0]
            raise fail(f"brokers.{name}: unknown key {key!r}", key, key)
        for key in ("port", "metrics_port"):
            port = table.get(key, 1 if key == "metrics_port" else None)
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
                raise fail(f"brokers.{name}: {key} must be an integer 1..65535",
                           f"[brokers.{name}]", key)
        ns = table.get("neighbours", [])
        if not isinstance(ns, list) or not all(isinstance(n, str) for n in ns):
            raise fail(f"brokers.{name}: neighbours must be a list of names",
                       f"[brokers.{name}]", "neighbours")
        nbrs[name] = set(ns)
        brokers_raw[name] = table
    edges: set[tuple[str, str]] = set()
    for name, ns in nbrs.items():
        for n in ns:
            if n not in nbrs:
                raise fail(f"brokers.{name}: unknown neighbour {n!r}", f'"{n}"', "neighbours")
            if n == name:
                raise fail(f"brokers.{name} lists itself as a neighbour", f"[brokers.{name}]",
                           "neighbours")
            edges.add((min(name, n), max(name, n)))
    for a, b in edges:
        nbrs[a].add(b)
        nbrs[b].add(a)
    _check_tree(list(nbrs), sorted(edges), fail)
    order = list(nbrs)
    base = path.parent if path is not None else Path.cwd()
    brokers = {}
    for name in order:
        t = brokers_raw[name]
        store = t.get("store")
        if store is not None and not isinstance(store, str):
            raise fail(f"brokers.{name}: store must be a file name", "store", "store")
        host = t.get("host", "127.0.0.1")
        if not isinstance(host, str):
            raise fail(f"brokers.{name}: host must be a string", "host", "host")
        paths: dict[str, Path | None] = {}
        for key in ("cert", "key"):
            v = t.get(key)
            if v is not None and not isinstance(v, str):
                raise fail(f"brokers.{name}: {key} must be a file name", key, key)
            paths[key] = base / v if v else None
        brokers[name] = BrokerConfig(name, host, t["port"],
                                     tuple(sorted(nbrs[name], key=order.index)),
                                     base / store if store else None, paths["cert"],
                                     paths["key"], t.get("metrics_port"))
    rn_raw = net.get("rendezvous", {})
    if not isinstance(rn_raw, dict):
        raise fail("[network.rendezvous] must map event types to brokers", "rendezvous")
    rendezvous: dict[str, str] = {}
    for tname in schema.names:
        node = rn_raw.get(tname, order[0])
        if node not in brokers:
            raise fail(f"rendezvous node of {tname} is {node!r}, not a broker", tname, tname)
        rendezvous[tname] = node
    for tname in rn_raw:
        if tname not in schema:
            raise fail(f"[network.rendezvous] names unknown event type {tname!r}", tname, tname)
    composite = net.get("composite", {})
    if not isinstance(composite, dict):
        raise fail("[network.composite] must be a table", "composite", "composite")
    try:
        settings = CompositeSettings.from_mapping(composite)
    except ConfigError as exc:
        raise fail(exc.message, exc.field or "composite", exc.field) from None
    security = _parse_security(data, schema, base, brokers, fail)
    return NetworkConfig(path, schema, protocol, strategy, flags["imperfect"],
                         flags["advertisements"], engine, limits.max_frame, rendezvous,
                         brokers, tuple(sorted(edges)), limits, composite=settings,
                         security=security, retained=retained, handoff=handoff,
                         sessions=policy)


def _parse_sessions(net: dict[str, Any], protocol: str, strategy: str, fail: Any
                    ) -> tuple[str | None, SessionPolicy]:
    """``[network] handoff`` and ``[network.sessions]``."""
    handoff = net.get("handoff")
    if handoff is not None:
        if handoff not in HANDOFFS:
            raise fail(f"handoff must be one of {', '.join(HANDOFFS)}, got {handoff!r}",
                       "handoff", "handoff")
        try:
            check_claims(handoff, protocol, strategy)
        except ConfigError as exc:
            raise fail(exc.message, "handoff", "handoff") from None
    table = net.get("sessions", {})
    if not isinstance(table, dict):
        raise fail("[network.sessions] must be a table", "sessions", "sessions")
    try:
        return handoff, SessionPolicy.from_mapping(table)
    except ConfigError as exc:
        raise fail(exc.message, exc.field or "sessions", exc.field) from None


def _parse_security(data: dict[str, Any], schema: Schema, base: Path,
                    brokers: Mapping[str, BrokerConfig], fail: Any) -> SecurityPolicy:
    """``[security]`` as a policy; with a ca, every broker needs its cert and key."""
    if "security" not in data:
        for b in brokers.values():
            if b.cert is not None or b.key is not None:
                raise fail(f"brokers.{b.name}: cert and key need a [security] section with "
                           "a ca", "cert", "cert")
        return OPEN
    try:
        policy = SecurityPolicy.from_toml(data["security"], schema, base=base,
                                          brokers=list(brokers))
    except ConfigError as exc:
        raise fail(exc.message, exc.field or "[security]", exc.field) from None
    for b in brokers.values():
        if policy.ca is not None and (b.cert is None or b.key is None):
            raise fail(f"brokers.{b.name} needs cert and key: [security] has a ca, so "
                       "every broker speaks TLS (siftbus certs issue "
                       f"{b.name})", f"[brokers.{b.name}]", "cert")
        if policy.ca is None and b.cert is not None:
            raise fail(f"brokers.{b.name}: cert without a [security] ca (which CA do its "
                       "neighbours trust?)", "cert", "cert")
        for p in (b.cert, b.key):
            if p is not None and not p.is_file():
                raise fail(f"brokers.{b.name}: {p} does not exist", str(p.name), "cert")
    return policy


def _parse_limits(net: dict[str, Any], fail: Any) -> Limits:
    """``[network.limits]`` (and the older ``[network] max_frame``) as :class:`Limits`."""
    table = net.get("limits", {})
    if not isinstance(table, dict):
        raise fail("[network.limits] must be a table of limits", "limits", "limits")
    if "max_frame" in net and "max_frame" in table:
        raise fail("max_frame is given in [network] and in [network.limits]: keep one",
                   "max_frame", "max_frame")
    base = DEFAULT_LIMITS.replace(max_frame=net.get("max_frame", MAX_FRAME))
    for key, value in table.items():
        kind = (int, float) if key.endswith("timeout") else int
        if isinstance(value, bool) or not isinstance(value, kind):
            raise fail(f"[network.limits] {key} must be a "
                       f"{'number of seconds' if key.endswith('timeout') else 'whole number'}",
                       key, key)
    if table.get("max_frame", 1024) < 1024:
        raise fail("max_frame must be an integer >= 1024", "max_frame", "max_frame")
    try:
        return Limits.from_mapping(table, base)
    except ConfigError as exc:
        raise fail(f"[network.limits] {exc.message}", exc.field or "limits", exc.field) \
            from None


def _parse_retained(net: dict[str, Any], fail: Any) -> RetainedLimits:
    """``[network.retained]`` as :class:`RetainedLimits`."""
    table = net.get("retained", {})
    if not isinstance(table, dict):
        raise fail("[network.retained] must be a table of limits", "retained", "retained")
    try:
        return RetainedLimits.from_mapping(table)
    except ConfigError as exc:
        raise fail(f"[network.retained] {exc.message}", exc.field or "retained", exc.field) \
            from None


def _check_tree(names: list[str], edges: list[tuple[str, str]], fail: Any) -> None:
    parent = {n: n for n in names}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            raise fail(f"the overlay must be a tree: the edge {a}-{b} closes a cycle",
                       f"[brokers.{b}]", "neighbours")
        parent[ra] = rb
    roots = {find(n) for n in names}
    if len(roots) > 1:
        raise fail(f"the overlay must be connected: {len(roots)} separate parts", "brokers",
                   "neighbours")


def load_network(path: str | Path) -> NetworkConfig:
    """Read and validate a network config file (strict UTF-8, one rule for text files)."""
    p = Path(path)
    return parse_network(read_text(p, kind=ConfigError), path=p)


__all__ = ["BrokerConfig", "NetworkConfig", "load_network", "parse_network"]
