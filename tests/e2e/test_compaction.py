"""Compaction: older messages are summarized for the model (automatically past a threshold,
and when the provider says the context is full); the history the user reads stays whole."""

import uuid
from typing import Any

import httpx
import pytest
from sqlmodel import Session

from activities.compaction import INSTRUCTION
from perdure.domain.compaction import SUMMARY_HEADING
from perdure.testing.chat_client import counting, key_of, send
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.stack import Stack
from storage.compactions import session_compactions
from storage.messages import recent_path_of


def new_session() -> str:
    return f"cmp-{uuid.uuid4().hex[:12]}"


def system_of(body: dict[str, Any]) -> str:
    return "".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


def turns_of(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"] if m["role"] != "system"]


async def events_of(http: httpx.AsyncClient, session: str, kind: str) -> list[dict[str, Any]]:
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    return [e for e in events if e["type"] == kind]


async def test_past_the_threshold_the_model_sees_a_summary_and_the_recent_messages(
    http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    session = new_session()
    for turn in range(5):
        await send(http, session, f"@count 40 turn {turn} {session}", agent="compacting")

    (request,) = fake_provider.requests_for(f"@count 40 turn 4 {session}")
    compacted = await events_of(http, session, "chat.context.compacted")
    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert compacted and compacted[0]["data"]["reason"] == "threshold"
    assert all(e["data"]["tokensAfter"] < e["data"]["tokensBefore"] for e in compacted)
    assert SUMMARY_HEADING in system_of(request.body)
    assert len(turns_of(request.body)) < 9
    assert len(history) == 10
    assert history[-1]["parts"][-1]["text"] == counting(40)


async def test_a_later_compaction_summarizes_the_earlier_summary_too(
    http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    session = new_session()
    for turn in range(8):
        await send(http, session, f"@count 40 again {turn} {session}", agent="compacting")

    compacted = await events_of(http, session, "chat.context.compacted")
    summaries = [r for r in fake_provider.requests_for(INSTRUCTION) if session in str(r.body)]

    assert len(compacted) >= 2
    assert any(SUMMARY_HEADING in system_of(r.body) for r in summaries)


async def test_a_full_context_window_compacts_and_the_step_is_retried_once(
    http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    session = new_session()
    for turn in range(4):
        await send(http, session, f"@count 40 fill {turn} {session}", agent="overflowing")

    text = f"@context_limit 120 @count 3 {session}"
    streamed = await send(http, session, text, agent="overflowing")

    requests = fake_provider.requests_for(text)
    assert [r.status for r in requests] == [400, 200]
    assert streamed.text() == counting(3)
    (compacted,) = await events_of(http, session, "chat.context.compacted")
    assert compacted["data"]["reason"] == "context_overflow"


async def test_a_context_that_stays_full_after_compacting_ends_the_turn_with_the_error(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(http, session, f"@count 40 only {session}", agent="overflowing")

    streamed = await send(
        http, session, f"@context_limit 5 @count 3 {session}", agent="overflowing"
    )

    assert streamed.chunks[-1]["type"] == "error"
    assert "maximum context length" in streamed.chunks[-1]["errorText"]


async def test_a_model_step_reads_only_the_messages_after_the_newest_summary(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    session = new_session()
    for turn in range(6):
        await send(http, session, f"@count 40 read {turn} {session}", agent="compacting")
    (compaction,) = (await session_compactions(stack.services.db, session_id=key_of(session)))[-1:]

    def read(db_session: Session) -> tuple[str | None, list[str]]:
        summary, recent = recent_path_of(db_session, session_id=key_of(session))
        return summary, [m.id for m in recent]

    summary, recent = await stack.services.db.read_sync(read)
    whole = [m["id"] for m in (await http.get(f"/api/chat/{session}/messages")).json()]

    assert summary == compaction.summary
    assert recent == whole[whole.index(compaction.up_to_message_id) + 1 :]
    assert len(recent) < len(whole)


@pytest.mark.parametrize("agent", ["anthropic", "responses"])
async def test_every_provider_api_s_full_context_error_compacts_and_retries(
    http: httpx.AsyncClient, fake_provider: FakeProvider, agent: str
) -> None:
    session = new_session()
    for turn in range(5):
        await send(http, session, f"@count 40 api {turn} {session}", agent=agent)

    text = f"@context_limit 200 @count 3 {session}"
    streamed = await send(http, session, text, agent=agent)

    # The Responses API answers 200 and tells the overflow inside the stream; the others 400.
    refused = 200 if agent == "responses" else 400
    assert [r.status for r in fake_provider.requests_for(text)] == [refused, 200]
    assert streamed.text() == counting(3)
    (compacted,) = await events_of(http, session, "chat.context.compacted")
    assert compacted["data"]["reason"] == "context_overflow"
