"""Bearer tokens: JWT signed with HMAC-SHA256 (PyJWT), carrying principal, expiry, scopes.

A client sends its token in HELLO (``"token": "..."``); the broker verifies the
signature, the expiry (with a small leeway for clock skew) and the audience, and binds the
connection to the token's subject. A tampered, expired, unsigned (``alg: none``) or
foreign-audience token is refused with :class:`~siftbus.errors.AuthenticationError`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jwt

from siftbus.errors import AuthenticationError, ConfigError

from .principal import Principal, PrincipalKind

ALGORITHM = "HS256"
AUDIENCE = "siftbus"
MIN_SECRET_BYTES = 32
"""HS256 keys shorter than the hash are guessable; refuse them."""
LEEWAY_SECONDS = 30.0
"""Clock skew tolerated between the issuer and the verifying broker."""
MAX_TOKEN_BYTES = 8192
SCOPES = frozenset({"publish", "subscribe", "advertise", "call"})
"""What a token's scopes may name: the actions its connection may take, within the
principal's rights (no scopes: every action the rights allow)."""


def new_secret() -> bytes:
    """A fresh random signing key (hex text, so it can live in a file)."""
    return secrets.token_hex(MIN_SECRET_BYTES).encode()


def load_secret(path: str | Path) -> bytes:
    """Read a signing key from a file (surrounding whitespace ignored)."""
    try:
        data = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read token key {path}: {exc.strerror}",
                          source=str(path)) from None
    if len(data) < MIN_SECRET_BYTES:
        raise ConfigError(f"token key {path} is {len(data)} bytes; it needs at least "
                          f"{MIN_SECRET_BYTES}", source=str(path))
    return data


class TokenSigner:
    """Issues and verifies the network's tokens with one secret key."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(f"a token key needs at least {MIN_SECRET_BYTES} bytes")
        self._secret = secret

    def issue(self, principal: str, *, ttl: float = 3600.0, scopes: Iterable[str] = (),
              now: float | None = None) -> str:
        """A token for ``principal`` valid for ``ttl`` seconds."""
        if not principal:
            raise ConfigError("a token needs a principal name")
        unknown = set(scopes) - SCOPES
        if unknown:
            raise ConfigError(f"unknown scope {', '.join(sorted(unknown))} (scopes: "
                              f"{', '.join(sorted(SCOPES))})", field="scope")
        t = time.time() if now is None else now
        claims = {"sub": principal, "aud": AUDIENCE, "iat": int(t), "exp": int(t + ttl),
                  "scope": " ".join(sorted(set(scopes)))}
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def verify(self, token: object, *, now: float | None = None) -> Principal:
        """The principal a token proves; :class:`AuthenticationError` if it proves none."""
        if not isinstance(token, str) or not token:
            raise AuthenticationError("the token must be a non-empty string")
        if len(token) > MAX_TOKEN_BYTES:
            raise AuthenticationError(f"the token exceeds {MAX_TOKEN_BYTES} bytes")
        options: Any = {"require": ["sub", "exp", "aud"]}
        try:
            if now is None:
                claims = jwt.decode(token, self._secret, algorithms=[ALGORITHM],
                                    audience=AUDIENCE, leeway=LEEWAY_SECONDS,
                                    options=options)
            else:  # tests pin the clock: check expiry ourselves
                claims = jwt.decode(token, self._secret, algorithms=[ALGORITHM],
                                    audience=AUDIENCE,
                                    options={**options, "verify_exp": False})
                if float(claims["exp"]) + LEEWAY_SECONDS < now:
                    raise jwt.ExpiredSignatureError("Signature has expired")
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("the token has expired") from None
        except jwt.InvalidTokenError as exc:
            raise AuthenticationError(f"the token is not valid: {exc}") from None
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise AuthenticationError("the token names no principal")
        scope = claims.get("scope", "")
        if not isinstance(scope, str):
            raise AuthenticationError("the token's scope must be a string")
        scopes = frozenset(scope.split())
        if scopes - SCOPES:
            raise AuthenticationError(f"the token names an unknown scope "
                                      f"{sorted(scopes - SCOPES)[0][:50]!r}")
        return Principal(sub, PrincipalKind.TOKEN, scopes, float(claims["exp"]))
