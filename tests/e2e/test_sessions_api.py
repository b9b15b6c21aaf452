"""The session API: list, read, rename, delete; tenants never see each other."""

import asyncio
import dataclasses
import uuid

import httpx

from gateway.app import create_app
from runtime.settings import ApiKeys
from tests.e2e.chat_client import chat_body, send, user_message
from tests.stack import Stack


async def test_a_new_chat_id_creates_a_session_titled_by_its_first_message(
    http: httpx.AsyncClient,
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await send(http, session, "@count 2 plan my trip")

    read = (await http.get(f"/v1/sessions/{session}")).json()
    listed = (await http.get("/v1/sessions", params={"limit": 200})).json()

    assert read["title"] == "@count 2 plan my trip"
    assert read["status"] == "idle"
    assert read["agent"] == "default"
    assert session in [s["id"] for s in listed["data"]]
    assert listed["count"] >= 1


async def test_sessions_are_listed_most_recent_first_with_paging(http: httpx.AsyncClient) -> None:
    older, newer = f"old-{uuid.uuid4().hex[:8]}", f"new-{uuid.uuid4().hex[:8]}"
    await send(http, older, "@count 1")
    await send(http, newer, "@count 1")

    page = (await http.get("/v1/sessions", params={"limit": 2, "offset": 0})).json()

    assert [s["id"] for s in page["data"]] == [newer, older]


async def test_a_session_can_be_renamed(http: httpx.AsyncClient) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await send(http, session, "@count 1")

    renamed = await http.patch(f"/v1/sessions/{session}", json={"title": "Trip to Lisbon"})

    assert renamed.status_code == 200
    assert renamed.json()["title"] == "Trip to Lisbon"
    assert (await http.get(f"/v1/sessions/{session}")).json()["title"] == "Trip to Lisbon"


async def test_an_empty_title_is_refused(http: httpx.AsyncClient) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await send(http, session, "@count 1")

    response = await http.patch(f"/v1/sessions/{session}", json={"title": ""})

    assert response.status_code == 422


async def test_a_deleted_session_is_gone_with_its_messages(http: httpx.AsyncClient) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await send(http, session, "@count 3")

    deleted = await http.delete(f"/v1/sessions/{session}")

    assert deleted.status_code == 204
    assert (await http.get(f"/v1/sessions/{session}")).status_code == 404
    assert (await http.get(f"/api/chat/{session}/messages")).status_code == 404


async def test_health_is_ok_when_temporal_and_the_store_answer(http: httpx.AsyncClient) -> None:
    response = await http.get("/healthz")

    assert response.status_code == 200
    assert response.json()["checks"] == {"store": "ok", "temporal": "ok"}


async def test_a_tenant_cannot_read_or_change_another_tenants_session(stack: Stack) -> None:
    settings = stack.settings.model_copy(
        update={"api_keys": ApiKeys.parse("key-a:alpha,key-b:beta")}
    )
    services = dataclasses.replace(stack.services, settings=settings)
    app = create_app(services=services)
    session = f"t-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as gateway:
        await gateway.post("/api/chat", json=chat_body(session, user_message("@count 1")))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://perdure") as api:
        alpha = {"Authorization": "Bearer key-a"}
        beta = {"Authorization": "Bearer key-b"}
        created = await api.post(
            "/api/chat", json=chat_body(f"{session}-a", user_message("hi")), headers=alpha
        )
        # the unauthenticated gateway's sessions belong to tenant "default"
        assert (await api.get(f"/v1/sessions/{session}", headers=alpha)).status_code == 404
        assert created.status_code == 200
        assert (await api.get(f"/v1/sessions/{session}-a", headers=beta)).status_code == 404
        assert (await api.delete(f"/v1/sessions/{session}-a", headers=beta)).status_code == 404
        hijack = await api.post(
            "/api/chat", json=chat_body(f"{session}-a", user_message("mine now")), headers=beta
        )
        assert hijack.status_code == 404
        assert (await api.get("/v1/sessions", headers=beta)).json()["count"] == 0
        assert (await api.get(f"/v1/sessions/{session}-a", headers=alpha)).status_code == 200


async def test_a_request_without_a_valid_key_is_a_401_when_keys_are_configured(
    stack: Stack,
) -> None:
    settings = stack.settings.model_copy(update={"api_keys": ApiKeys.parse("key-a:alpha")})
    app = create_app(services=dataclasses.replace(stack.services, settings=settings))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://perdure") as api:
        missing = await api.get("/v1/sessions")
        wrong = await api.get("/v1/sessions", headers={"Authorization": "Bearer nope"})

    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.json()["error"]["code"] == "unauthorized"


async def test_deleting_a_session_mid_stream_ends_the_stream_cleanly(
    http: httpx.AsyncClient,
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    streaming = asyncio.create_task(send(http, session, "@count 400 @delay 10"))
    for _ in range(500):
        if (await http.get(f"/api/chat/{session}/messages")).status_code == 200:
            history = (await http.get(f"/api/chat/{session}/messages")).json()
            if len(history) == 2:
                break
        await asyncio.sleep(0.02)

    deleted = await http.delete(f"/v1/sessions/{session}")
    streamed = await asyncio.wait_for(streaming, timeout=20)

    assert deleted.status_code == 204
    assert streamed.done
    assert streamed.types()[-1] == "abort"
    assert (await http.get(f"/v1/sessions/{session}")).status_code == 404
