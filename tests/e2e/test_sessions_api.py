"""The session API: list, read, rename, delete; tenants never see each other, and each has
chat ids of its own."""

import asyncio
import dataclasses
import uuid

import httpx

from gateway.app import create_app
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import chat_body, counting, send, user_message
from perdure.testing.stack import Stack
from tests.waiting import eventually


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


async def test_a_tenant_cannot_read_or_change_another_tenants_session(
    stack: Stack, tenants: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    alpha, beta = tenants
    session = f"t-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as gateway:
        await gateway.post("/api/chat", json=chat_body(session, user_message("@count 1")))
    created = await alpha.post("/api/chat", json=chat_body(f"{session}-a", user_message("hi")))

    # the unauthenticated gateway's sessions belong to tenant "default"
    assert (await alpha.get(f"/v1/sessions/{session}")).status_code == 404
    assert created.status_code == 200
    assert (await beta.get(f"/v1/sessions/{session}-a")).status_code == 404
    assert (await beta.delete(f"/v1/sessions/{session}-a")).status_code == 404
    assert session not in [s["id"] for s in (await beta.get("/v1/sessions")).json()["data"]]
    assert (await alpha.get(f"/v1/sessions/{session}-a")).status_code == 200


async def test_two_tenants_may_use_the_same_chat_id(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alpha, beta = tenants
    chat = f"shared-{uuid.uuid4().hex[:8]}"

    ours = await send(alpha, chat, "@count 2 alpha's question")
    theirs = await send(beta, chat, "@count 3 beta's question")
    submitted = await beta.post(
        f"/v1/sessions/{chat}/submissions",
        json={"messages": [user_message("@count 1 beta again")], "wait": True},
    )
    histories = [(await t.get(f"/api/chat/{chat}/messages")).json() for t in tenants]
    reads = [(await t.get(f"/v1/sessions/{chat}")).json() for t in tenants]
    listed = [(await t.get("/v1/sessions", params={"limit": 200})).json() for t in tenants]
    ledgers = [(await t.get(f"/v1/sessions/{chat}/submissions")).json() for t in tenants]

    assert (ours.text(), theirs.text()) == (counting(2), counting(3))
    assert submitted.status_code == 200
    assert submitted.json()["sessionId"] == chat
    assert [[m["role"] for m in h] for h in histories] == [
        ["user", "assistant"],
        ["user", "assistant"] * 2,
    ]
    assert [h[0]["parts"][0]["text"] for h in histories] == [
        "@count 2 alpha's question",
        "@count 3 beta's question",
    ]
    assert [(r["id"], r["title"]) for r in reads] == [
        (chat, "@count 2 alpha's question"),
        (chat, "@count 3 beta's question"),
    ]
    assert [[s["id"] for s in page["data"]].count(chat) for page in listed] == [1, 1]
    assert [page["count"] for page in ledgers] == [1, 2]
    assert {row["sessionId"] for page in ledgers for row in page["data"]} == {chat}
    assert ours.headers["x-perdure-submission-id"] not in [
        row["submissionId"] for row in ledgers[1]["data"]
    ]

    assert (await alpha.delete(f"/v1/sessions/{chat}")).status_code == 204
    assert (await alpha.get(f"/v1/sessions/{chat}")).status_code == 404
    assert (await beta.get(f"/api/chat/{chat}/messages")).json() == histories[1]
    assert (await beta.get(f"/v1/sessions/{chat}/submissions")).json()["count"] == 2


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

    async def answering() -> bool:
        response = await http.get(f"/api/chat/{session}/messages")
        return response.status_code == 200 and len(response.json()) == 2

    await eventually(answering, what=f"the answer begun in {session}")

    deleted = await http.delete(f"/v1/sessions/{session}")
    streamed = await asyncio.wait_for(streaming, timeout=20)

    assert deleted.status_code == 204
    assert streamed.done
    assert streamed.types()[-1] == "abort"
    assert (await http.get(f"/v1/sessions/{session}")).status_code == 404


async def test_the_history_can_be_read_as_its_newest_messages_only(
    http: httpx.AsyncClient,
) -> None:
    session = f"page-{uuid.uuid4().hex[:8]}"
    for n in (1, 2, 3):
        await send(http, session, f"@count {n}")

    newest = (await http.get(f"/api/chat/{session}/messages", params={"limit": 3})).json()

    assert [(m["role"], m["parts"][-1]["text"]) for m in newest] == [
        ("assistant", counting(2)),
        ("user", "@count 3"),
        ("assistant", counting(3)),
    ]


async def test_a_history_limit_below_one_is_refused(http: httpx.AsyncClient) -> None:
    session = f"page-{uuid.uuid4().hex[:8]}"
    await send(http, session, "@count 1")

    refused = await http.get(f"/api/chat/{session}/messages", params={"limit": 0})

    assert refused.status_code == 422
