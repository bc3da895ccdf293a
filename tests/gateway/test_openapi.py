"""The gateway's OpenAPI document, property-tested with schemathesis: requests generated
from the document to every operation of a live gateway (a real 3-broker network in a
thread of its own) never give a server error, and the answers that the document
describes match their schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from .servers import NetworkThread

CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def gateway_url() -> Iterator[str]:
    with NetworkThread() as gn:
        yield gn.url


def test_every_operation_answers_within_its_contract(gateway_url: str) -> None:
    api = schemathesis.openapi.from_url(gateway_url + "/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 12
    for op in operations:
        if op.path == "/api/sse":
            continue  # an endless stream: tested in test_gateway.py

        @given(case=op.as_strategy())
        @settings(max_examples=20, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(base_url=gateway_url, checks=CHECKS)

        check()


def test_the_document_describes_the_routes(gateway_url: str) -> None:
    doc = requests.get(gateway_url + "/openapi.json", timeout=10).json()
    paths = set(doc["paths"])
    assert {"/api/publish", "/api/subscriptions", "/api/explain", "/api/schema",
            "/api/network", "/api/sse", "/api/channels"} <= paths
    body = doc["paths"]["/api/publish"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/x-ndjson"} <= set(body)
    ws = doc["info"]["description"]  # the WebSocket protocol, sessions and acks included
    assert all(f'"op": "{op}"' in ws for op in ("subscribe", "unsubscribe", "publish",
                                                 "watch", "ping", "session", "ack"))
    assert '"type": "notifications"' in ws
