"""The HTTP gateway: REST, WebSocket and Server-Sent Events over one broker client,
Prometheus metrics and the web dashboard (docs/gateway.md)."""

from siftbus.errors import require_extra

require_extra("gateway", "the HTTP gateway", "fastapi", "orjson", "httpx", "swagger_ui_bundle")

from siftbus.gateway.hub import Gateway
from siftbus.gateway.limits import GatewayLimits
from siftbus.gateway.server import GatewayServer

__all__ = ["Gateway", "GatewayLimits", "GatewayServer"]
