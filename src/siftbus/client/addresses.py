"""Where a client connects: ``host:port`` addresses and the TLS context of a client."""

from __future__ import annotations

import ssl
from pathlib import Path

from siftbus.errors import EnvironmentProblem
from siftbus.security.tls import TLSConfig, client_context


def client_tls(ca: str | Path, cert: str | Path | None = None,
               key: str | Path | None = None) -> ssl.SSLContext:
    """A TLS context for a client: trust the network's CA, present ``cert``/``key``
    (a client certificate from ``siftbus certs issue NAME --kind client``) if given."""
    return client_context(TLSConfig(Path(cert) if cert else None,
                                    Path(key) if key else None, Path(ca)))


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (or ``port``) -> ``(host, port)``."""
    host, _, port = text.rpartition(":")
    try:
        return (host or "127.0.0.1", int(port))
    except ValueError:
        raise EnvironmentProblem(f"bad broker address {text!r}: use host:port") from None


__all__ = ["client_tls", "parse_address"]
