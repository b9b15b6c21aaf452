"""Every error at the gateway is JSON with a request id, never plain text; every response
carries the request id."""

import logging
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from gateway.app import create_app
from gateway.routes import sessions
from perdure.testing.stack import Stack

GENERATED = re.compile(r"^[0-9a-f]{32}$")


def api(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://perdure")


def assert_json_error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, str] = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert error["requestId"] == response.headers["x-request-id"]
    return error


async def test_every_response_echoes_a_sane_request_id_or_gets_a_new_one(
    http: httpx.AsyncClient,
) -> None:
    given = await http.get("/healthz", headers={"X-Request-ID": "trace-42.a:b_c"})
    insane = await http.get("/healthz", headers={"X-Request-ID": "x" * 200})
    spaced = await http.get("/healthz", headers={"X-Request-ID": "two words"})
    missing = await http.get("/healthz")

    assert given.headers["x-request-id"] == "trace-42.a:b_c"
    assert GENERATED.match(insane.headers["x-request-id"])
    assert GENERATED.match(spaced.headers["x-request-id"])
    assert GENERATED.match(missing.headers["x-request-id"])
    assert missing.headers["x-request-id"] != insane.headers["x-request-id"]


async def test_a_refused_request_names_its_request_id_in_the_json_error(
    http: httpx.AsyncClient,
) -> None:
    unknown = await http.get("/v1/sessions/nobody-here", headers={"X-Request-ID": "req-1"})
    no_route = await http.get("/no/such/route")
    wrong_method = await http.put("/v1/sessions")

    assert assert_json_error(unknown, 404, "session_not_found")["requestId"] == "req-1"
    assert_json_error(no_route, 404, "not_found")
    assert_json_error(wrong_method, 405, "method_not_allowed")


async def test_an_unexpected_error_is_a_json_500_with_the_request_id_and_no_internals(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("postgresql://admin:hunter2@db.internal/perdure is on fire")

    monkeypatch.setattr(sessions, "list_sessions", broken)
    async with api(create_app(services=stack.services)) as client:
        with caplog.at_level(logging.ERROR, logger="perdure.gateway"):
            response = await client.get("/v1/sessions", headers={"X-Request-ID": "boom-1"})

    error = assert_json_error(response, 500, "internal_error")
    assert error["requestId"] == "boom-1"
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text and "RuntimeError" not in response.text
    logged = [r for r in caplog.records if "boom-1" in r.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert "hunter2" in str(logged[0].exc_info[1])


async def test_an_error_raised_in_a_stream_before_its_first_byte_is_a_json_error(
    stack: Stack,
) -> None:
    app = create_app(services=stack.services)

    async def failing_events() -> AsyncIterator[str]:
        raise RuntimeError("the store vanished before the first event")
        yield "never"  # pragma: no cover - makes this an async generator

    @app.get("/test/failing-stream")
    async def failing_stream() -> StreamingResponse:
        return StreamingResponse(failing_events(), media_type="text/event-stream")

    async with api(app) as client:
        response = await client.get("/test/failing-stream")

    assert_json_error(response, 500, "internal_error")
    assert "vanished" not in response.text
