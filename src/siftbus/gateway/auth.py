"""Credentials of a gateway request: a bearer token, passed through to the brokers.

A request proves its principal with ``Authorization: Bearer <token>`` (a token from
``siftbus certs token NAME``). Browsers cannot set headers on a WebSocket or an
``EventSource``, so ``/api/ws`` and ``/api/sse`` also take ``?token=...`` (uvicorn's
access log is off, so the query string is not written anywhere by the gateway).
On an open network (no ``[security]``) credentials are ignored.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from siftbus.security.tokens import bearer_token

from .hub import Gateway

bearer = HTTPBearer(auto_error=False, description="A siftbus token (siftbus certs token "
                    "NAME); required when the network has [security] without anonymous "
                    "access.")

Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def token_of(gw: Gateway, header: str | None, query: str | None) -> str | None:
    """The token of a request (header first), or ``None`` on an open network."""
    if gw.net.security.open:
        return None
    return bearer_token(header) or query or None  # a malformed header: 401


def request_token(gw: Gateway, request: Request, creds: HTTPAuthorizationCredentials | None
                  ) -> str | None:
    header = f"Bearer {creds.credentials}" if creds is not None else \
        request.headers.get("authorization")
    return token_of(gw, header, request.query_params.get("token"))


async def caller_token(request: Request, creds: Bearer) -> str | None:
    """The dependency of every REST route: the caller's token (``app.state.gateway``)."""
    return request_token(request.app.state.gateway, request, creds)


Token = Annotated[str | None, Depends(caller_token)]
"""A route parameter holding the caller's token."""


def websocket_token(gw: Gateway, ws: WebSocket) -> str | None:
    return token_of(gw, ws.headers.get("authorization"), ws.query_params.get("token"))


__all__ = ["Bearer", "Token", "bearer", "caller_token", "request_token", "token_of",
           "websocket_token"]
