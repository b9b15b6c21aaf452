"""An agent's budgets (docs/usage.md): `max_turn_tokens` and `max_steps` end a turn with the
agent's budget message, `finishReason` `budget` in the message metadata (the AI SDK's own
`finish` chunk says `other`), the partial kept; the session takes the next message."""

import uuid
from typing import Any

import httpx

from perdure.testing.agents.chat import counted_runs
from perdure.testing.chat_client import Streamed, counting, send


def new_session() -> str:
    return f"budget-{uuid.uuid4().hex[:12]}"


def ending(streamed: Streamed) -> dict[str, Any]:
    finish = streamed.chunks[-1]
    assert finish["type"] == "finish", streamed.types()
    return finish


async def stored(http: httpx.AsyncClient, session: str) -> dict[str, Any]:
    message: dict[str, Any] = (await http.get(f"/api/chat/{session}/messages")).json()[-1]
    return message


async def test_a_step_past_the_token_budget_ends_the_turn_before_its_tool_calls_run(
    http: httpx.AsyncClient,
) -> None:
    session, label = new_session(), f"unrun-{uuid.uuid4().hex[:6]}"
    streamed = await send(
        http, session, f'@tool counted {{"label": "{label}"}}', agent="token-budget"
    )

    finish = ending(streamed)
    assert finish["finishReason"] == "other"
    assert finish["messageMetadata"]["finishReason"] == "budget"
    assert finish["messageMetadata"]["usage"]["totalTokens"] > 1
    assert label not in counted_runs
    settled = next(c for c in streamed.chunks if c["type"] == "tool-output-error")
    assert settled["errorText"] == "The turn reached its budget before the tool call ran."
    assert streamed.text().endswith("Out of tokens for this turn.")
    message = await stored(http, session)
    assert message["metadata"]["finishReason"] == "budget"
    assert message["parts"][-1] == {
        "type": "text",
        "text": "Out of tokens for this turn.",
        "state": "done",
    }


async def test_a_turn_within_its_token_budget_that_calls_no_tool_ends_as_usual(
    http: httpx.AsyncClient,
) -> None:
    streamed = await send(http, new_session(), "@count 3", agent="token-budget")

    assert ending(streamed)["finishReason"] == "stop"
    assert streamed.text() == counting(3)


async def test_the_last_allowed_step_runs_its_tool_calls_then_ends_the_turn_on_its_budget(
    http: httpx.AsyncClient,
) -> None:
    label = f"ran-{uuid.uuid4().hex[:6]}"
    streamed = await send(
        http, new_session(), f'@tool counted {{"label": "{label}"}}', agent="one-step"
    )

    assert ending(streamed)["messageMetadata"]["finishReason"] == "budget"
    assert counted_runs.count(label) == 1
    output = next(c for c in streamed.chunks if c["type"] == "tool-output-available")
    assert output["output"] == f"counted {label}"
    assert streamed.text().endswith("This turn reached its budget and stopped here.")


async def test_a_session_takes_the_next_message_after_a_turn_ended_on_its_budget(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(http, session, '@tool counted {"label": "first"}', agent="one-step")

    following = await send(http, session, "@count 2", agent="one-step")

    assert ending(following)["finishReason"] == "stop"
    assert following.text() == counting(2)
