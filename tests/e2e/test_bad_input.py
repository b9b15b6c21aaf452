"""Bad input gets a 4xx JSON error and writes nothing."""

import uuid
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import chat_body, user_message


async def session_count(http: httpx.AsyncClient) -> int:
    count: int = (await http.get("/v1/sessions")).json()["count"]
    return count


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


BAD_BODIES: dict[str, tuple[Any, int, str]] = {
    "empty messages": ({"id": "s", "messages": []}, 422, "invalid_request"),
    "no messages at all": ({"id": "s"}, 422, "invalid_request"),
    "missing session id": ({"messages": [user_message("hi")]}, 422, "invalid_request"),
    "session id with a slash": (
        {"id": "a/b", "messages": [user_message("hi")]},
        422,
        "invalid_request",
    ),
    "unknown role": (
        {"id": "s", "messages": [{"id": "m", "role": "robot", "parts": [text_part("hi")]}]},
        422,
        "invalid_request",
    ),
    "unknown part type": (
        {"id": "s", "messages": [{"id": "m", "role": "user", "parts": [{"type": "hologram"}]}]},
        422,
        "invalid_request",
    ),
    "a message without text": (
        {"id": "s", "messages": [{"id": "m", "role": "user", "parts": []}]},
        422,
        "empty_message",
    ),
    "an assistant message last that continues no answer": (
        {"id": "s", "messages": [{"id": "m", "role": "assistant", "parts": [text_part("x")]}]},
        404,
        "message_not_found",
    ),
    "a system message last": (
        {"id": "s", "messages": [{"id": "m", "role": "system", "parts": [text_part("x")]}]},
        422,
        "unsupported_message",
    ),
    "unknown trigger": (
        {"id": "s", "trigger": "explode", "messages": [user_message("hi")]},
        422,
        "invalid_request",
    ),
    "a text part whose text is not a string": (
        {
            "id": "s",
            "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": 5}]}],
        },
        422,
        "invalid_request",
    ),
    "a NUL character in the text": (
        {"id": "s", "messages": [user_message("nul \x00 here")]},
        422,
        "invalid_request",
    ),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_an_invalid_chat_request_is_refused_with_a_json_error(
    http: httpx.AsyncClient, case: str
) -> None:
    body, status, code = BAD_BODIES[case]
    if isinstance(body, dict) and body.get("id") == "s":
        body = {**body, "id": f"bad-{uuid.uuid4().hex[:8]}"}
    before = await session_count(http)

    response = await http.post("/api/chat", json=body)

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert await session_count(http) == before


async def test_malformed_json_is_a_400(http: httpx.AsyncClient) -> None:
    before = await session_count(http)

    response = await http.post(
        "/api/chat",
        content=b'{"id": "x", "messages": [',
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"
    assert await session_count(http) == before


async def test_a_message_over_the_size_limit_is_a_413(http: httpx.AsyncClient) -> None:
    before = await session_count(http)
    huge = user_message("x" * 1_000_001)

    response = await http.post("/api/chat", json=chat_body(f"big-{uuid.uuid4().hex[:8]}", huge))

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "message_too_large"
    assert await session_count(http) == before


async def test_a_body_far_over_the_limit_is_refused_before_parsing(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/api/chat",
        content=b"[" + b"1," * 9_000_000 + b"1]",
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


async def test_a_small_bodys_route_refuses_a_large_body_before_parsing(
    http: httpx.AsyncClient,
) -> None:
    response = await http.patch("/v1/sessions/any-chat", json={"title": "x" * 20_000})

    assert response.status_code == 413
    assert response.json()["error"] == {
        "code": "body_too_large",
        "message": "the request body is over 16384 bytes",
        "requestId": response.headers["x-request-id"],
    }


async def test_a_chunked_body_is_refused_as_it_grows_past_the_limit(
    http: httpx.AsyncClient,
) -> None:
    async def chunks() -> Any:
        yield b'{"messageId": "'
        for _ in range(40):
            yield b"x" * 1024
        yield b'"}'

    response = await http.post(
        "/v1/sessions/any-chat/leaf",
        content=chunks(),
        headers={"content-type": "application/json"},
    )

    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/chat/{id}/stream"),
        ("POST", "/api/chat/{id}/stop"),
        ("GET", "/api/chat/{id}/messages"),
        ("GET", "/v1/sessions/{id}"),
        ("PATCH", "/v1/sessions/{id}"),
        ("DELETE", "/v1/sessions/{id}"),
    ],
)
async def test_an_unknown_session_is_a_404(http: httpx.AsyncClient, method: str, path: str) -> None:
    url = path.format(id=f"nobody-{uuid.uuid4().hex[:8]}")
    body = {"title": "x"} if method == "PATCH" else None

    response = await http.request(method, url, json=body)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"


async def test_a_bad_resume_cursor_is_a_400(http: httpx.AsyncClient) -> None:
    session = f"cursor-{uuid.uuid4().hex[:8]}"
    await http.post("/api/chat", json=chat_body(session, user_message("@count 2")))

    response = await http.get(f"/api/chat/{session}/stream", headers={"Last-Event-ID": "seven"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_cursor"


async def test_reusing_a_stored_message_id_with_another_key_is_a_409(
    http: httpx.AsyncClient,
) -> None:
    session = f"reuse-{uuid.uuid4().hex[:8]}"
    await http.post("/api/chat", json=chat_body(session, user_message("@count 2", "m1")))

    response = await http.post(
        "/api/chat",
        json=chat_body(session, user_message("@count 3", "m1")),
        headers={"Idempotency-Key": "another"},
    )

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "message_conflict"


async def test_a_lone_surrogate_in_the_message_is_a_422(http: httpx.AsyncClient) -> None:
    before = await session_count(http)
    session = f"bad-{uuid.uuid4().hex[:8]}"
    part = '{"type": "text", "text": "half \\ud800 a pair"}'
    body = f'{{"id": "{session}", "messages": [{{"id": "m", "role": "user", "parts": [{part}]}}]}}'

    response = await http.post(
        "/api/chat", content=body.encode(), headers={"content-type": "application/json"}
    )

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert await session_count(http) == before


HUGE = "123456789012345678901234567"
"""27 digits: far past any integer column."""

OUT_OF_BOUNDS: dict[str, tuple[str, dict[str, str], int, str]] = {
    "a 27-digit sessions offset": (f"/v1/sessions?offset={HUGE}", {}, 422, "invalid_request"),
    "a negative sessions offset": ("/v1/sessions?offset=-1", {}, 422, "invalid_request"),
    "a 27-digit sessions limit": (f"/v1/sessions?limit={HUGE}", {}, 422, "invalid_request"),
    "a 27-digit events cursor": (
        f"/v1/sessions/{{id}}/events?after={HUGE}",
        {},
        422,
        "invalid_request",
    ),
    "a 27-digit events limit": (
        f"/v1/sessions/{{id}}/events?limit={HUGE}",
        {},
        422,
        "invalid_request",
    ),
    "a 27-digit stream cursor": (
        f"/api/chat/{{id}}/stream?after={HUGE}",
        {},
        422,
        "invalid_request",
    ),
    "a 27-digit Last-Event-ID": (
        "/api/chat/{id}/stream",
        {"Last-Event-ID": HUGE},
        400,
        "bad_cursor",
    ),
    "a 27-digit seq in an event id": (
        "/api/chat/{id}/stream",
        {"Last-Event-ID": f"0123abcd:{HUGE}"},
        400,
        "bad_cursor",
    ),
    "a Last-Event-ID over 100 characters": (
        "/api/chat/{id}/stream",
        {"Last-Event-ID": "7" * 101},
        422,
        "invalid_request",
    ),
    "a session id over 200 characters": (f"/v1/sessions/{'s' * 201}", {}, 422, "invalid_request"),
    "a session id with a space": ("/v1/sessions/two%20words", {}, 422, "invalid_request"),
}


@pytest.mark.parametrize("case", list(OUT_OF_BOUNDS))
async def test_a_query_parameter_header_or_path_out_of_bounds_is_a_json_4xx(
    http: httpx.AsyncClient, case: str
) -> None:
    session = f"bounds-{uuid.uuid4().hex[:8]}"
    await http.post("/api/chat", json=chat_body(session, user_message("@count 1")))
    path, headers, status, code = OUT_OF_BOUNDS[case]

    response = await http.get(path.format(id=session), headers=headers)

    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["requestId"] == response.headers["x-request-id"]


async def test_an_idempotency_key_over_300_characters_is_a_422(http: httpx.AsyncClient) -> None:
    before = await session_count(http)

    response = await http.post(
        "/api/chat",
        json=chat_body(f"key-{uuid.uuid4().hex[:8]}", user_message("@count 1")),
        headers={"Idempotency-Key": "k" * 301},
    )

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert await session_count(http) == before
