"""Usage (docs/usage.md): every model step records what its provider reported; a turn's
totals end its stream, in the `finish` chunk's message metadata, and stay in the stored
message."""

import uuid
from typing import Any

import httpx

from perdure.testing.chat_client import Streamed, send


def new_session() -> str:
    return f"usage-{uuid.uuid4().hex[:12]}"


def usage_of(streamed: Streamed) -> dict[str, Any]:
    finish = streamed.chunks[-1]
    assert finish["type"] == "finish", streamed.types()
    usage: dict[str, Any] = finish["messageMetadata"]["usage"]
    return usage


async def stored_usage(http: httpx.AsyncClient, session: str) -> dict[str, Any]:
    messages = (await http.get(f"/api/chat/{session}/messages")).json()
    usage: dict[str, Any] = messages[-1]["metadata"]["usage"]
    return usage


async def test_a_turns_usage_ends_its_stream_and_stays_in_the_stored_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    streamed = await send(http, session, "@count 3")

    usage = usage_of(streamed)
    assert usage["outputTokens"] == 3  # the fake reports one token a word
    assert usage["inputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert usage["cachedInputTokens"] == usage["reasoningTokens"] == 0
    assert await stored_usage(http, session) == usage


async def test_a_turn_of_two_model_steps_counts_both(http: httpx.AsyncClient) -> None:
    one_step = usage_of(await send(http, new_session(), "@count 3"))
    two_steps = usage_of(await send(http, new_session(), '@tool calculate {"expression": "1+1"}'))

    # The second step reads the first step's call and result: more input than one step.
    assert two_steps["inputTokens"] > 2 * one_step["inputTokens"] - 1
    assert two_steps["outputTokens"] > 0
