"""Helpers for the security tests: a CA with broker and client certificates, a token key,
policies over the broker tests' schema, and secured brokers on 127.0.0.1 port 0.

Import with ``from secure import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.servers import close_all as close_all  # the security tests take it from here
from broker.servers import eventually as eventually  # the same bounded wait
from broker.servers import start_network
from broker_strategies import SCHEMA
from siftbus.broker.server import BrokerServer
from siftbus.broker.store import ProfileStore
from siftbus.client import Client, client_tls
from siftbus.model import Schema
from siftbus.security.certs import CertKind, init_ca, issue
from siftbus.security.guard import Guard
from siftbus.security.policy import SecurityPolicy
from siftbus.security.tls import ContextSet, TLSConfig
from siftbus.security.tokens import TokenSigner, new_secret


@dataclass(frozen=True)
class Pki:
    """A CA directory with broker and client certificates and a token key."""

    dir: Path
    signer: TokenSigner

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    def token(self, principal: str, **kw: Any) -> str:
        return self.signer.issue(principal, **kw)

    def client_tls(self, name: str | None = None) -> ssl.SSLContext:
        """Trust the CA; present the client certificate ``name`` if given."""
        if name is None:
            return client_tls(self.ca)
        return client_tls(self.ca, self.dir / f"{name}.pem", self.dir / f"{name}.key")

    def broker_tls(self, name: str) -> ContextSet:
        return ContextSet(TLSConfig(self.dir / f"{name}.pem", self.dir / f"{name}.key",
                                    self.ca))


def make_pki(d: Path, brokers: Iterable[str] = ("B0", "B1", "B2"),
             clients: Iterable[str] = ("alice", "bob")) -> Pki:
    init_ca(d)
    for b in brokers:
        issue(d, b, kind=CertKind.BROKER)
    for c in clients:
        issue(d, c, kind=CertKind.CLIENT)
    secret = new_secret()
    (d / "token.key").write_bytes(secret)
    return Pki(d, TokenSigner(secret))


def policy(pki: Pki | None, principals: dict[str, Any] | None = None, *,
           brokers: Iterable[str] = ("B0", "B1", "B2"), schema: Schema = SCHEMA,
           **options: Any) -> SecurityPolicy:
    """A policy (by default over the broker tests' schema: ``T(a, b, s)``, ``U(x)``)."""
    table: dict[str, Any] = {**options, "principals": principals or {}}
    if pki is not None:
        table.setdefault("ca", str(pki.ca))
        table.setdefault("token_key", str(pki.dir / "token.key"))
    return SecurityPolicy.from_toml(table, schema, base=Path("/"), brokers=list(brokers))


async def start_secure(names: list[str], edges: list[tuple[str, str]],
                       pol: SecurityPolicy, pki: Pki | None, *, protocol: str = "forwarding",
                       strategy: str = "covering", stores: dict[str, Path] | None = None,
                       wait: bool = True, schema: Schema = SCHEMA,
                       rendezvous: dict[str, str] | None = None, **node: Any
                       ) -> dict[str, BrokerServer]:
    """Brokers of a tree with the policy (and TLS when ``pki``), each dialing the
    neighbours listed before it and knowing the whole tree (``start_network``);
    ``rendezvous``: each event type's rendezvous broker (rendezvous routing)."""
    def own(b: str) -> dict[str, Any]:
        return {"guard": Guard(pol),
                "store": ProfileStore(stores[b]) if stores and b in stores else None}

    return await start_network(names, edges, protocol, strategy, rendezvous, schema=schema,
                               tls=pki.broker_tls if pki is not None else None,
                               per_broker=own, wait=20 if wait else None, **node)


async def connect(srv: BrokerServer, pki: Pki | None, principal: str | None = None, *,
                  name: str | None = None, cert: str | None = None) -> Client:
    """A client of ``principal`` (by token) and/or ``cert`` (by certificate)."""
    token = pki.token(principal) if pki is not None and principal is not None else None
    tls = pki.client_tls(cert) if pki is not None else None
    return await Client.connect(port=srv.port, name=name, token=token, tls=tls,
                                server_hostname="localhost" if tls else None)


