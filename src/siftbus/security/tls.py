"""TLS contexts for every listener and dialer, from certificate paths.

Brokers speak mutual TLS to each other: each presents its certificate and requires its
peer's, both signed by the network's CA, and the certificate's common name must be the
configured neighbour's name (checked by the broker after the handshake, with
:func:`peer_common_name`). Client ports and HTTP endpoints require a client certificate
only when configured to; clients may authenticate with a token instead.

Certificates can be replaced without a restart: :meth:`ContextSet.reload_if_changed`
loads new files into the live contexts, which affects every later handshake (Python's
``SSLContext.load_cert_chain`` replaces the chain in place).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from siftbus.errors import ConfigError, SiftbusError

log = logging.getLogger("siftbus.security")

RELOAD_INTERVAL = 10.0
"""Seconds between two checks of the certificate files' modification times."""


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """Where a server's or client's certificate, key and trusted CA are."""

    cert: Path | None
    key: Path | None
    ca: Path
    require_client_cert: bool = False
    """A server: refuse clients without a certificate signed by ``ca``."""

    def check(self) -> TLSConfig:
        """Raise :class:`ConfigError` naming a missing file."""
        for what, p in (("certificate", self.cert), ("key", self.key), ("CA", self.ca)):
            if p is not None and not Path(p).is_file():
                raise ConfigError(f"TLS {what} {p} does not exist", source=str(p))
        if (self.cert is None) != (self.key is None):
            raise ConfigError("TLS needs both a certificate and its key, or neither")
        return self


def _load_chain(ctx: ssl.SSLContext, cfg: TLSConfig) -> None:
    if cfg.cert is not None and cfg.key is not None:
        try:
            ctx.load_cert_chain(str(cfg.cert), str(cfg.key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS certificate {cfg.cert} with key {cfg.key}: "
                              f"{exc}", source=str(cfg.cert)) from None


def _load_ca(ctx: ssl.SSLContext, cfg: TLSConfig) -> None:
    try:
        ctx.load_verify_locations(cafile=str(cfg.ca))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS CA {cfg.ca}: {exc}", source=str(cfg.ca)) from None


def server_context(cfg: TLSConfig) -> ssl.SSLContext:
    """A context for a listener: TLS 1.2+, the server's chain, optional client certs."""
    cfg.check()
    if cfg.cert is None:
        raise ConfigError("a TLS server needs a certificate and key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, cfg)
    _load_ca(ctx, cfg)
    ctx.verify_mode = ssl.CERT_REQUIRED if cfg.require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(cfg: TLSConfig) -> ssl.SSLContext:
    """A context for a dialer: verifies the server against the CA and its host name, and
    presents the dialer's own certificate when it has one (mutual TLS)."""
    cfg.check()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_ca(ctx, cfg)
    _load_chain(ctx, cfg)
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def peer_common_name(ssl_object: Any) -> str | None:
    """The common name of the verified peer certificate of a connection, if any.

    ``ssl_object`` is what ``transport.get_extra_info("ssl_object")`` returns.
    """
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class ContextSet:
    """A server and a client context built from one config, reloadable in place."""

    def __init__(self, cfg: TLSConfig) -> None:
        self.config = cfg
        self.server = server_context(cfg) if cfg.cert is not None else None
        self.client = client_context(cfg)
        self._stamp = self._mtimes()

    def _mtimes(self) -> tuple[float, ...]:
        out = []
        for p in (self.config.cert, self.config.key, self.config.ca):
            try:
                out.append(Path(p).stat().st_mtime if p is not None else 0.0)
            except OSError:
                out.append(-1.0)
        return tuple(out)

    def reload_if_changed(self) -> bool:
        """Load changed certificate files into the live contexts; True if it did.

        A broken new file leaves the old chain in use and raises :class:`ConfigError`.
        """
        stamp = self._mtimes()
        if stamp == self._stamp:
            return False
        for ctx in (self.server, self.client):
            if ctx is not None:
                _load_chain(ctx, self.config)
                _load_ca(ctx, self.config)
        self._stamp = stamp
        return True

    async def watch(self, name: str, interval: float = RELOAD_INTERVAL) -> None:
        """Every ``interval`` seconds, load replaced certificate files (later handshakes
        use them; open connections keep theirs); runs until cancelled. A broken new file
        is logged and the old chain stays (every server runs this as a task)."""
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload_if_changed():
                    log.warning("%s: certificates reloaded", name)
            except SiftbusError as exc:
                log.error("%s: certificates not reloaded, the old ones stay: %s", name, exc)
