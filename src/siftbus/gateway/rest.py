"""The gateway's REST routes (``/api/...``): publish, pull subscriptions, explain, schema,
the network, routing tables, channel administration."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from siftbus.errors import (
    ConnectionLostError,
    DuplicateProfileError,
    EventError,
    QuotaExceeded,
    UnknownProfileError,
)
from siftbus.lang.profile import parse_profile_text
from siftbus.match.explain import explain
from siftbus.model import event_from_dict
from siftbus.model.textio import decode_text, parse_json_line

from .auth import Token, token_of
from .codec import dumps_bytes
from .hub import Gateway
from .publish import parse_publish_body


class SubscribeRequest(BaseModel):
    profile: str = Field(description="A profile line, e.g. 'Temperature(room = 12, value > 20)'.",
                         max_length=65536)
    id: str | None = Field(None, description="The subscription's id (default: the profile "
                           "line's own id, else s<n>).", max_length=64)


class Subscribed(BaseModel):
    id: str
    profile: str


class PullSubscription(Subscribed):
    queued: int
    dropped: int


class LineErrorModel(BaseModel):
    line: int = Field(description="Line of the body (JSON lines) or item from 1 (array).")
    column: int | None
    message: str


class PublishResult(BaseModel):
    published: int
    rejected: int
    errors: list[LineErrorModel] = Field(description="The first refused items.")


class ExplainRequest(BaseModel):
    profile: str = Field(max_length=65536)
    event: dict[str, Any] = Field(description="An event as in an event file.")


class Condition(BaseModel):
    condition: str
    event_value: str
    holds: bool


class ExplainResult(BaseModel):
    profile: str
    matches: bool
    type_ok: bool
    conditions: list[Condition]
    summary: str


class Notifications(BaseModel):
    notifications: list[dict[str, Any]]
    dropped: int = Field(description="Notifications dropped since the subscription began.")


class ChannelCreate(BaseModel):
    qos: dict[str, Any] = Field(default_factory=dict)
    admin: dict[str, Any] = Field(default_factory=dict)


_PUBLISH_BODY: dict[str, Any] = {
    "requestBody": {"required": True, "content": {
        "application/json": {"schema": {"oneOf": [
            {"type": "object", "description": "one event"},
            {"type": "array", "items": {"type": "object"}, "description": "a batch"}]}},
        "application/x-ndjson": {"schema": {"type": "string",
                                            "description": "one event per line"}}}}}


def router(gw: Gateway) -> APIRouter:
    """The REST routes of gateway ``gw``."""
    api = APIRouter(prefix="/api")

    @api.get("/health", summary="The gateway and its broker",
             responses={503: {"description": "the broker does not answer"}})
    async def health(response: Response) -> dict[str, Any]:
        """``status`` ``ok`` (200) while the gateway's broker answers, ``unavailable``
        (503) while it does not; ``client``: the gateway's connection's name at its
        broker (``null`` on a secured network, where connections are per token)."""
        up, client = await gw.health()
        if not up:
            response.status_code = 503
        return {"status": "ok" if up else "unavailable", "broker": gw.broker,
                "client": client, "secured": gw.secured}

    @api.get("/schema", summary="The event types of the network")
    async def schema(token: Token) -> dict[str, dict[str, str]]:
        await gw.session(token)  # on a secured network: only for authenticated callers
        return gw.schema.to_dict()

    @api.post("/publish", response_model=PublishResult,
              openapi_extra={**_PUBLISH_BODY, "security": [{"HTTPBearer": []}]},
              summary="Publish one event or a batch",
              responses={400: {"description": "no valid event, or a malformed body"},
                         413: {"description": "body or batch too large"}})
    async def publish(request: Request) -> Response:
        """A JSON object (one event), a JSON array, or JSON lines
        (``application/x-ndjson``). The valid events are published; each refused one is
        reported with its line. 400 when none was valid."""
        # served by app.PublishRoute in front of the router (the hot route); this
        # declaration documents it and answers alike when the app is used without it
        status, body = await answer_publish(
            gw, request.headers.get("authorization"), request.query_params.get("token"),
            request.headers.get("content-type", "application/json"), await request.body())
        return Response(body, status_code=status, media_type="application/json")

    @api.post("/subscriptions", status_code=201, response_model=Subscribed,
              summary="Subscribe a profile (notifications pulled with GET)")
    async def subscribe(req: SubscribeRequest, token: Token) -> dict[str, str]:
        if len(gw.pulls) >= gw.limits.max_subscriptions:
            raise QuotaExceeded(f"at most {gw.limits.max_subscriptions} pull subscriptions",
                                quota="max_subscriptions")
        sid = req.id or parse_profile_text(req.profile).id
        if sid is not None and sid in gw.pulls:
            raise DuplicateProfileError(f"subscription {sid!r} exists", field="id")
        ob = gw.open_outbox("p", await gw.session(token))
        ob.token = token
        try:
            out = await gw.subscribe(ob, req.profile, sid or ob.key)
        except BaseException:
            await gw.close_outbox(ob)
            raise
        gw.pulls[out["id"]] = ob
        return out

    @api.get("/subscriptions", response_model=list[PullSubscription],
              summary="The pull subscriptions")
    async def subscriptions(token: Token) -> list[dict[str, Any]]:
        client = await gw.session(token)
        return [{"id": sid, "profile": ob.subscriptions[sid], "queued": ob.queued,
                 "dropped": ob.dropped} for sid, ob in gw.pulls.items()
                if ob.client is client]

    async def pull(sid: str, token: str | None) -> Any:
        """A pull subscription of the caller (another token's is unknown to it)."""
        client = await gw.session(token)
        ob = gw.pulls.get(sid)
        if ob is not None and ob.lost and ob.token == token:
            del gw.pulls[sid]
            await gw.close_outbox(ob)
            raise ConnectionLostError(f"subscription {sid!r} ended: the connection to broker "
                                      f"{gw.broker} was lost; subscribe again")
        if ob is None or ob.client is not client:
            raise UnknownProfileError(f"no subscription {sid!r}", field="id")
        return ob

    @api.get("/subscriptions/{sid}/notifications", response_model=Notifications,
             summary="Take the queued notifications of a subscription")
    async def notifications(
            sid: str, token: Token,
            max: Annotated[int, Query(ge=1, le=100_000)] = 100,
            wait: Annotated[float, Query(ge=0, le=86400)] = 0.0) -> dict[str, Any]:
        """Up to ``max`` notifications; with ``wait`` seconds, waits that long for a
        first one (both bounded by the gateway's limits)."""
        ob = await pull(sid, token)
        wait = min(wait, gw.limits.max_wait)
        if wait > 0:
            await ob.wait(wait)
        return {"notifications": ob.take(min(max, gw.limits.max_pull)),
                "dropped": ob.dropped}

    @api.delete("/subscriptions/{sid}", status_code=204, summary="Unsubscribe")
    async def unsubscribe(sid: str, token: Token) -> Response:
        ob = await pull(sid, token)
        del gw.pulls[sid]
        await gw.close_outbox(ob)
        return Response(status_code=204)

    @api.post("/explain", response_model=ExplainResult,
              summary="Why an event does or does not match a profile")
    async def explain_route(req: ExplainRequest, token: Token) -> dict[str, Any]:
        await gw.session(token)
        data = exact_numbers(req.event)
        return explain(gw.schema, req.profile, event_from_dict(data, gw.schema)).to_dict()

    @api.get("/network", summary="Topology, every broker's stats and table summary")
    async def network(token: Token) -> dict[str, Any]:
        return await gw.network(token)

    @api.get("/brokers/{name}/table", summary="A broker's routing table: its roots")
    async def table(name: str, token: Token,
                    limit: Annotated[int, Query(ge=0, le=1000)] = 100) -> dict[str, Any]:
        gw.net.broker(name)
        result: dict[str, Any] = await gw.call(name, "inspect", "table", token=token,
                                               limit=limit)
        return result

    @api.get("/channels", summary="The notification channels of the gateway's broker")
    async def channels(token: Token) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await gw.call(gw.broker, "channel", "list_channels",
                                                     token=token)
        return result

    @api.post("/channels", status_code=201, summary="Create a channel")
    async def create_channel(req: ChannelCreate, token: Token) -> dict[str, int]:
        cid = await gw.call(gw.broker, "channel", "create_channel", token=token, qos=req.qos,
                            admin=req.admin)
        return {"id": int(cid)}

    @api.delete("/channels/{cid}", status_code=204, summary="Destroy a channel")
    async def destroy_channel(cid: int, token: Token) -> Response:
        await gw.call(gw.broker, "channel", "destroy_channel", token=token, channel=cid)
        return Response(status_code=204)

    return api


async def answer_publish(gw: Gateway, authorization: str | None, query_token: str | None,
                         content_type: str, raw: bytes) -> tuple[int, bytes]:
    """Status and JSON body of ``POST /api/publish`` (errors raise): the body read
    (:func:`~.publish.parse_publish_body`; a large one in a thread), its valid events
    published and acknowledged by the broker, the refused ones reported."""
    client = await gw.session(token_of(gw, authorization, query_token))
    # strict UTF-8 and a leading BOM skipped, as every file reader does: a byte that is
    # not UTF-8 refuses the body (line and column named), never publishes U+FFFD
    text = decode_text(raw, source="body", kind=EventError)
    batch = await asyncio.to_thread(parse_publish_body, text, content_type, gw.schema,
                                    gw.limits) if len(raw) > 65536 else \
        parse_publish_body(text, content_type, gw.schema, gw.limits)
    published = await gw.publish(client, batch.events)
    gw.counters.rejected += batch.error_count
    return (400 if batch.error_count and not published else 200,
            dumps_bytes({"published": published, "rejected": batch.error_count,
                         "errors": [e.to_dict() for e in batch.errors]}))


def exact_numbers(data: dict[str, Any]) -> dict[str, Any]:
    """An event object as pydantic decoded it, with numbers made exact again (floats
    become decimals through their shortest text, as the event-file reader has them)."""
    parsed: dict[str, Any] = parse_json_line(json.dumps(data), source="event", decimals=True,
                                             unique_keys=True)
    return parsed


__all__ = ["answer_publish", "router"]
