"""The ``[security]`` section of a network config: who may connect and do what.

::

    [security]
    ca = "certs/ca.pem"             # trusted CA: neighbour brokers and client certificates
    token_key = "certs/token.key"   # HMAC key of client tokens (siftbus certs token NAME)
    anonymous = false               # clients without credentials (default: refused)
    client_cert_required = false    # clients must present a certificate of the CA
    narrow = false                  # subscriptions outside a right: narrowed, not refused
    callback_prefixes = []          # URL prefixes the XML endpoint may call back

    [security.default]              # rights of authenticated principals not listed below
    subscribe = []

    [security.principals.b3]        # a principal: token subject or certificate common name
    subscribe = ["Temperature(building = 3)"]
    publish = ["Temperature(building = 3)"]
    advertise = ["Temperature(building = 3)"]
    services = ["broker.stats", "channel.*"]
    max_profiles = 100              # quotas (optional)
    publish_rate = 1000.0
    publish_burst = 2000.0
    max_queued_bytes = 8388608

Each broker's certificate and key are given in its own table (``[brokers.B1] cert, key``).
A network config without a ``[security]`` section is *open*: every client may do
everything, and servers then listen on loopback only (see the broker's ``--insecure``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from siftbus.errors import AuthenticationError, ConfigError
from siftbus.model import Schema

from .principal import ANONYMOUS, Principal, PrincipalKind
from .quotas import UNLIMITED, Quotas
from .rights import NOTHING, Rights, RightSet, unrestricted
from .tls import TLSConfig, peer_common_name
from .tokens import TokenSigner, load_secret

_PRINCIPAL_KEYS = {"subscribe", "publish", "advertise", "services", "max_profiles",
                   "publish_rate", "publish_burst", "max_queued_bytes"}
_SECURITY_KEYS = {"ca", "token_key", "anonymous", "client_cert_required", "narrow",
                  "callback_prefixes", "default", "principals"}


@dataclass(frozen=True, slots=True)
class Grant:
    """The rights and quotas of one principal (or of the default)."""

    publish: RightSet = NOTHING
    subscribe: RightSet = NOTHING
    advertise: RightSet = NOTHING
    services: tuple[str, ...] = ()
    quotas: Quotas = UNLIMITED


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ConfigError(f"{what} must be a list of strings", field=what)
    return value


def _grant(data: Any, schema: Schema, where: str) -> Grant:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a table", field=where)
    unknown = set(data) - _PRINCIPAL_KEYS
    if unknown:
        raise ConfigError(f"{where} has unknown keys {', '.join(sorted(unknown))} "
                          f"(allowed: {', '.join(sorted(_PRINCIPAL_KEYS))})", field=where)

    def rights(kind: str) -> RightSet:
        return RightSet.parse(_strings(data.get(kind, []), f"{where}.{kind}"), schema,
                              what=f"{where}.{kind}")

    quotas = Quotas(**{k: data[k] for k in ("max_profiles", "publish_rate", "publish_burst",
                                            "max_queued_bytes") if k in data})
    return Grant(rights("publish"), rights("subscribe"), rights("advertise"),
                 tuple(_strings(data.get("services", []), f"{where}.services")), quotas)


@dataclass(frozen=True, slots=True)
class SecurityPolicy:
    """Authentication and authorization of one network."""

    ca: Path | None = None
    token_key: Path | None = None
    anonymous: bool = True
    client_cert_required: bool = False
    narrow: bool = False
    callback_prefixes: tuple[str, ...] = ()
    default: Grant = Grant()
    principals: Mapping[str, Grant] = field(default_factory=dict)
    brokers: frozenset[str] = frozenset()
    """Names that may speak as brokers (the network config's brokers)."""
    open: bool = True
    """No ``[security]`` section: everything allowed, loopback only."""

    @classmethod
    def from_toml(cls, data: Any, schema: Schema, *, base: Path,
                  brokers: Iterable[str]) -> SecurityPolicy:
        """Validate a ``[security]`` table; relative paths are relative to ``base``."""
        if not isinstance(data, Mapping):
            raise ConfigError("[security] must be a table", field="security")
        unknown = set(data) - _SECURITY_KEYS
        if unknown:
            raise ConfigError(f"[security] has unknown keys {', '.join(sorted(unknown))}",
                              field="security")

        def path(key: str) -> Path | None:
            v = data.get(key)
            if v is None:
                return None
            if not isinstance(v, str):
                raise ConfigError(f"security.{key} must be a path", field=key)
            p = base / v
            if not p.is_file():
                raise ConfigError(f"security.{key}: {p} does not exist", field=key)
            return p

        def flag(key: str, default: bool) -> bool:
            v = data.get(key, default)
            if not isinstance(v, bool):
                raise ConfigError(f"security.{key} must be true or false", field=key)
            return v

        principals = data.get("principals", {})
        if not isinstance(principals, Mapping):
            raise ConfigError("[security.principals] must be a table", field="principals")
        policy = cls(
            ca=path("ca"), token_key=path("token_key"), anonymous=flag("anonymous", False),
            client_cert_required=flag("client_cert_required", False),
            narrow=flag("narrow", False),
            callback_prefixes=tuple(_strings(data.get("callback_prefixes", []),
                                             "security.callback_prefixes")),
            default=_grant(data.get("default", {}), schema, "security.default"),
            principals={name: _grant(g, schema, f"security.principals.{name}")
                        for name, g in principals.items()},
            brokers=frozenset(brokers), open=False)
        if policy.ca is None and policy.token_key is None and not policy.anonymous:
            raise ConfigError("[security] needs a ca (certificates) or a token_key (tokens), "
                              "or anonymous = true", field="security")
        return policy

    @property
    def authenticates(self) -> bool:
        """Every client must prove who it is (no anonymous access)."""
        return not self.open and not self.anonymous

    def grant(self, principal: Principal) -> Grant:
        return self.principals.get(principal.name, self.default)

    def rights(self, principal: Principal) -> Rights:
        """What ``principal`` may do (everything on an open network or for a broker)."""
        if self.open or principal.is_broker:
            return unrestricted(principal.name)
        g = self.grant(principal)
        return Rights(principal.name, g.publish, g.subscribe, g.advertise, g.services,
                      self.narrow)

    def quotas(self, principal: Principal) -> Quotas:
        if self.open or principal.is_broker:
            return UNLIMITED
        return self.grant(principal).quotas

    def tls(self, cert: Path | None, key: Path | None) -> TLSConfig | None:
        """The TLS settings of a server or dialer with this certificate, if any."""
        if self.ca is None:
            return None
        return TLSConfig(cert, key, self.ca, self.client_cert_required)

    def callback_allowed(self, url: str) -> bool:
        """Whether the XML endpoint may POST notifications to ``url``."""
        return self.open or any(url.startswith(p) for p in self.callback_prefixes)


OPEN = SecurityPolicy()
"""The policy of a network config without a ``[security]`` section."""


class Authenticator:
    """Turns a connection's credentials into a :class:`Principal`, or refuses it."""

    def __init__(self, policy: SecurityPolicy) -> None:
        self.policy = policy
        self._signer = (TokenSigner(load_secret(policy.token_key))
                        if policy.token_key is not None else None)

    def client(self, token: object, ssl_object: Any = None) -> Principal:
        """A client's principal from its HELLO token or its verified certificate."""
        p = self.policy
        if p.open:
            return ANONYMOUS
        cn = peer_common_name(ssl_object)
        if p.client_cert_required and cn is None:
            raise AuthenticationError("a client certificate of the network's CA is required")
        if token is not None:
            if self._signer is None:
                raise AuthenticationError("this network accepts no tokens")
            principal = self._signer.verify(token)
            if cn is not None and cn != principal.name:
                raise AuthenticationError(f"the token's principal {principal.name!r} is not "
                                          f"the certificate's {cn!r}")
            return principal
        if cn is not None:
            if cn in p.brokers:
                raise AuthenticationError(f"{cn!r} is a broker certificate, not a client's")
            return Principal(cn, PrincipalKind.CERTIFICATE)
        if p.anonymous:
            return ANONYMOUS
        raise AuthenticationError("credentials required: a token in HELLO or a client "
                                  "certificate")

    def broker(self, claimed: str, ssl_object: Any = None) -> Principal:
        """A neighbour broker: its certificate's common name must be the name it claims,
        and that name a broker of the network."""
        p = self.policy
        if p.open:
            return Principal(claimed, PrincipalKind.BROKER)
        cn = peer_common_name(ssl_object)
        if cn is None:
            raise AuthenticationError(f"broker {claimed!r} presented no certificate")
        if cn != claimed or cn not in p.brokers:
            raise AuthenticationError(f"certificate of {cn!r} cannot speak as broker "
                                      f"{claimed!r}")
        return Principal(cn, PrincipalKind.BROKER)
