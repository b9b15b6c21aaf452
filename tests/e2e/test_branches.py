"""Branches: regenerating an answer makes a sibling (nothing is deleted); the active branch
can be switched; a session can be forked from a message."""

import asyncio
import uuid
from typing import Any

import httpx

from perdure.testing.chat_client import Streamed, counting, read_stream, send, user_message


def new_session() -> str:
    return f"branch-{uuid.uuid4().hex[:12]}"


async def history(http: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        while (await http.get(f"/v1/sessions/{session}")).json()["status"] != "idle":
            await asyncio.sleep(0.05)
    messages: list[dict[str, Any]] = (await http.get(f"/api/chat/{session}/messages")).json()
    return messages


async def regenerate(
    http: httpx.AsyncClient, session: str, user: dict[str, Any], assistant_id: str
) -> Streamed:
    body = {
        "id": session,
        "messages": [user],
        "trigger": "regenerate-message",
        "messageId": assistant_id,
    }
    return await read_stream(http, "POST", "/api/chat", json=body)


async def answered_twice(
    http: httpx.AsyncClient, session: str
) -> tuple[dict[str, Any], str, Streamed]:
    user = user_message("@count 3 twice")
    first = await send(http, session, "@count 3 twice", message_id=user["id"])
    first_id = first.chunks[0]["messageId"]
    await history(http, session)
    return user, first_id, await regenerate(http, session, user, first_id)


async def test_regenerating_an_answer_makes_a_sibling_and_the_history_follows_it(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    user, first_id, second = await answered_twice(http, session)

    second_id = second.chunks[0]["messageId"]
    messages = await history(http, session)
    alternatives = (await http.get(f"/v1/sessions/{session}/messages/{second_id}/siblings")).json()

    assert second_id != first_id
    assert second.text() == counting(3)
    assert [m["id"] for m in messages] == [user["id"], second_id]
    assert [(s["id"], s["active"]) for s in alternatives] == [
        (first_id, False),
        (second_id, True),
    ]


async def test_switching_the_active_branch_changes_the_history(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    user, first_id, _ = await answered_twice(http, session)

    switched = await http.post(f"/v1/sessions/{session}/leaf", json={"messageId": first_id})

    assert switched.json() == {"leafMessageId": first_id}
    assert [m["id"] for m in await history(http, session)] == [user["id"], first_id]


async def test_the_next_message_continues_the_active_branch(http: httpx.AsyncClient) -> None:
    session = new_session()
    user, first_id, _ = await answered_twice(http, session)
    await http.post(f"/v1/sessions/{session}/leaf", json={"messageId": first_id})

    await send(http, session, "@count 1 after")
    messages = await history(http, session)

    assert [m["id"] for m in messages][:2] == [user["id"], first_id]
    assert len(messages) == 4


async def test_the_branch_cannot_be_switched_while_a_turn_runs(http: httpx.AsyncClient) -> None:
    session = new_session()
    user, first_id, _ = await answered_twice(http, session)
    await send(http, session, "@count 200 @delay 20", stop_after=4)

    refused = await http.post(f"/v1/sessions/{session}/leaf", json={"messageId": first_id})

    assert refused.status_code == 409
    await http.post(f"/api/chat/{session}/stop")


async def test_a_session_forked_from_a_message_has_the_history_up_to_it(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    user, first_id, _ = await answered_twice(http, session)
    forked_id = f"{session}-fork"

    forked = await http.post(
        f"/v1/sessions/{session}/fork", json={"messageId": first_id, "sessionId": forked_id}
    )
    again = await http.post(
        f"/v1/sessions/{session}/fork", json={"messageId": first_id, "sessionId": forked_id}
    )
    await send(http, forked_id, "@count 2 in the fork")

    assert forked.status_code == 201
    assert again.status_code == 409
    assert [m["id"] for m in await history(http, forked_id)][:2] == [user["id"], first_id]
    assert len(await history(http, session)) == 2


async def test_branch_requests_about_unknown_messages_are_404(http: httpx.AsyncClient) -> None:
    session = new_session()
    await send(http, session, "@count 1")

    siblings = await http.get(f"/v1/sessions/{session}/messages/nope/siblings")
    leaf = await http.post(f"/v1/sessions/{session}/leaf", json={"messageId": "nope"})
    regenerated = await regenerate(http, session, user_message("never stored"), "x")

    assert siblings.status_code == 404
    assert leaf.status_code == 404
    assert regenerated.status == 409


async def test_editing_a_user_message_makes_a_sibling_branch(http: httpx.AsyncClient) -> None:
    session = new_session()
    original = await send(http, session, "@count 2 original", message_id="u1")
    await send(http, session, "@count 1 follow-up")
    await history(http, session)

    edited = await send(http, session, "@count 3 edited", message_id="u1", messageId="u1")
    messages = await history(http, session)
    alternatives = (
        await http.get(f"/v1/sessions/{session}/messages/{messages[0]['id']}/siblings")
    ).json()

    assert edited.text() == counting(3)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["id"].startswith("u1.edit-")
    assert messages[0]["parts"][0]["text"] == "@count 3 edited"
    assert [(s["id"], s["active"]) for s in alternatives] == [
        ("u1", False),
        (messages[0]["id"], True),
    ]
    await http.post(f"/v1/sessions/{session}/leaf", json={"messageId": "u1"})
    restored = await history(http, session)
    assert [m["id"] for m in restored][:2] == ["u1", original.chunks[0]["messageId"]]
    assert len(restored) == 4
