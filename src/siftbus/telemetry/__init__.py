"""OpenTelemetry tracing (``docs/tracing.md``): spans after the messaging semantic
conventions, the W3C trace context carried in frames, off by default.

Off (the default), nothing here imports OpenTelemetry and every hook is one attribute
test (``TRACER is None``), so a process that never traces pays nothing and needs no
``opentelemetry`` package. :func:`enable` (or ``SIFTBUS_TRACING=1`` with
``siftbus.telemetry.enable_from_env()``, which the CLI calls) turns it on with the global
tracer provider or one given.

The spans of one event's path, one trace:

* ``send {type}`` (PRODUCER) where a client publishes; its context travels in the PUB
  frame (body key ``tc``: ``{"traceparent": ..., "tracestate": ...}``);
* ``process {type}`` (CONSUMER) at each broker that matches and routes the frame; the
  PUB frames it forwards and the NOTIFY frames it sends carry its context;
* ``receive`` (CONSUMER) where a client takes a NOTIFY frame;
* ``settle`` (CLIENT) when a session client acknowledges what it received.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from siftbus.errors import EnvironmentProblem

TRACER: Any = None
"""The tracer while tracing is on, else ``None`` (the one test every hook makes)."""
KEY = "tc"
"""The frame body key of the W3C trace context."""
SYSTEM = "siftbus"

_propagator: Any = None


def enable(provider: Any = None) -> None:
    """Trace from now on, with ``provider`` (an OpenTelemetry ``TracerProvider``) or the
    global one."""
    global TRACER, _propagator
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TRACER = trace.get_tracer("siftbus", tracer_provider=provider)
    _propagator = TraceContextTextMapPropagator()


def disable() -> None:
    global TRACER
    TRACER = None


def enable_from_env() -> bool:
    """:func:`enable` when ``SIFTBUS_TRACING`` is ``1`` (with ``OTEL_*`` settings for an
    OTLP exporter when ``opentelemetry-exporter-otlp`` is installed); returns whether."""
    if os.environ.get("SIFTBUS_TRACING", "") not in ("1", "true", "yes"):
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise EnvironmentProblem("SIFTBUS_TRACING=1 needs the OpenTelemetry SDK: pip "
                                 "install 'siftbus[tracing]' (opentelemetry-sdk)") from None

    provider = TracerProvider()
    with contextlib.suppress(ImportError):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    enable(provider)
    return True


def carrier() -> dict[str, str] | None:
    """The current context as a W3C carrier (``None`` without a current span)."""
    if TRACER is None:
        return None
    out: dict[str, str] = {}
    _propagator.inject(out)
    return out or None


def _context(tc: Any) -> Any:
    if isinstance(tc, Mapping):
        return _propagator.extract({str(k): str(v) for k, v in tc.items()})
    return None


def _attributes(operation: str, kind: str, destination: str | None, count: int | None,
                extra: Mapping[str, Any] | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"messaging.system": SYSTEM,
                             "messaging.operation.type": kind,
                             "messaging.operation.name": operation}
    if destination:
        attrs["messaging.destination.name"] = destination
    if count is not None:
        attrs["messaging.batch.message_count"] = count
    if extra:
        attrs.update(extra)
    return attrs


@contextlib.contextmanager
def span(operation: str, *, parent: Any = None, destination: str | None = None,
         count: int | None = None, attributes: Mapping[str, Any] | None = None
         ) -> Iterator[Any]:
    """A messaging span ``{operation} {destination}`` (``operation``: send, process,
    receive, settle), child of the carrier ``parent`` when given, else of the current
    span; current while the block runs. Yields ``None`` when tracing is off."""
    if TRACER is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    kinds = {"send": SpanKind.PRODUCER, "process": SpanKind.CONSUMER,
             "receive": SpanKind.CONSUMER, "settle": SpanKind.CLIENT}
    name = f"{operation} {destination}" if destination else operation
    with TRACER.start_as_current_span(
            name, context=_context(parent), kind=kinds[operation],
            attributes=_attributes(operation, operation, destination, count,
                                   attributes)) as s:
        yield s


@contextlib.contextmanager
def attached(headers: Mapping[str, str]) -> Iterator[None]:
    """The W3C context of incoming HTTP ``headers`` (``traceparent``) made current, so
    spans started inside continue the caller's trace (nothing when tracing is off)."""
    if TRACER is None or "traceparent" not in headers:
        yield
        return
    from opentelemetry import context

    token = context.attach(_context(headers))
    try:
        yield
    finally:
        context.detach(token)


def destinations(blocks: Any) -> str | None:
    """The event types of encoded blocks (``"Temperature"``, ``"A,B"``)."""
    names = sorted({str(b.get("t", b.get("type", ""))) for b in blocks
                    if isinstance(b, Mapping)} - {""})
    return ",".join(names) or None


__all__ = ["KEY", "SYSTEM", "TRACER", "attached", "carrier", "destinations", "disable",
           "enable", "enable_from_env", "span"]
