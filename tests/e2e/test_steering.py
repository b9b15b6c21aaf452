"""`steer`: a message sent while a turn runs joins it at its next step boundary, or is
answered as the next turn; each one exactly once, in order (docs/api.md, "Concurrency")."""

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import counting, read_stream, send
from perdure.testing.stack import Stack
from tests.e2e.terminal import run_perdure
from tests.e2e.test_concurrency import LONG, start_long_turn, status_of, submission, submit

TOOL_LOOP = '@tool wait {"seconds": 3}'
"""One tool round of 3 s: the steering message arrives while it runs, even on a loaded machine."""


def new_session() -> str:
    return f"steer-{uuid.uuid4().hex[:12]}"


def calling_a_tool(chunk: dict[str, Any]) -> bool:
    return bool(chunk["type"] == "tool-input-available")


async def start_tool_loop(
    http: httpx.AsyncClient, session: str, loop: str = TOOL_LOOP
) -> "asyncio.Task[Any]":
    """The turn, followed to its end in the background; returns once its tool runs."""
    answer = asyncio.create_task(send(http, session, loop))
    async with asyncio.timeout(30):
        while True:
            seen = await read_stream(
                http, "GET", f"/api/chat/{session}/stream", stop_when=calling_a_tool
            )
            if seen.status == 200 and any(calling_a_tool(c) for c in seen.chunks):
                return answer
            await asyncio.sleep(0.05)


def steered_texts(parts: list[dict[str, Any]]) -> list[str]:
    return [
        part["data"]["message"]["parts"][0]["text"]
        for part in parts
        if part["type"] == "data-steer"
    ]


async def history(http: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    return list((await http.get(f"/api/chat/{session}/messages")).json())


async def test_a_steering_message_joins_the_tool_loop_at_its_next_step_boundary(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    answer = await start_tool_loop(http, session)

    steering = await submit(http, session, "@count 3 steered", concurrency="steer")

    streamed = await answer
    types = streamed.types()
    joined_at = types.index("data-steer")
    assert types.index("tool-output-available") < joined_at < len(types) - 1
    assert types[joined_at + 1 :].count("start-step") == 1
    assert streamed.text() == counting(3)  # the next request saw it, after the tool result
    joined = await submission(http, session, steering["submissionId"])
    running_id = streamed.headers["x-perdure-submission-id"]
    assert (joined["status"], joined["mergedInto"]) == ("skipped", running_id)
    messages = await history(http, session)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert steered_texts(messages[1]["parts"]) == ["@count 3 steered"]


async def test_steering_messages_join_together_in_the_order_they_were_sent(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    answer = await start_tool_loop(http, session)

    first = await submit(http, session, "first, @count 1", concurrency="steer")
    second = await submit(http, session, "then @count 2", concurrency="steer")

    streamed = await answer
    assert [c["data"]["submissionId"] for c in streamed.chunks if c["type"] == "data-steer"] == [
        first["submissionId"],
        second["submissionId"],
    ]
    assert streamed.text() == counting(2)
    messages = await history(http, session)
    assert steered_texts(messages[-1]["parts"]) == ["first, @count 1", "then @count 2"]


async def test_a_steering_message_sent_during_the_last_text_step_is_answered_next(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    steering = await submit(http, session, "@count 2 next", concurrency="steer")

    assert await status_of(http, session, running) == "completed"
    own = await read_stream(
        http, "GET", f"/v1/sessions/{session}/submissions/{steering['submissionId']}/stream"
    )
    assert own.text() == counting(2)
    assert (await submission(http, session, steering["submissionId"]))["status"] == "completed"
    messages = await history(http, session)
    assert [(m["role"], steered_texts(m["parts"])) for m in messages] == [
        ("user", []),
        ("assistant", []),
        ("user", []),
        ("assistant", []),
    ]
    assert messages[2]["parts"][0]["text"] == "@count 2 next"


async def test_a_stop_keeps_pending_steering_messages_and_runs_them_next(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)
    first = await submit(http, session, "@count 2 first", concurrency="steer")
    second = await submit(http, session, "@count 3 second", concurrency="steer")

    stopped = await http.post(f"/api/chat/{session}/stop")

    assert stopped.json()["result"] == "stopped"
    assert await status_of(http, session, running) == "aborted"
    assert await status_of(http, session, first["submissionId"]) == "completed"
    assert await status_of(http, session, second["submissionId"]) == "completed"
    users = [m["parts"][0]["text"] for m in await history(http, session) if m["role"] == "user"]
    assert users == [LONG, "@count 2 first", "@count 3 second"]


async def test_a_stop_that_drops_steering_ends_them_unrun_and_says_so(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)
    pending = await submit(http, session, "@count 2 dropped", concurrency="steer")

    stopped = await http.post(f"/api/chat/{session}/stop", params={"dropSteering": "true"})

    assert stopped.json()["result"] == "stopped"
    assert await status_of(http, session, running) == "aborted"
    dropped = await submission(http, session, pending["submissionId"])
    assert (dropped["status"], dropped["error"]) == ("skipped", "dropped by a stop (dropSteering)")
    after = await send(http, session, "@count 2 after")
    assert after.text() == counting(2)


async def test_steering_is_refused_for_what_cannot_join_a_turn(http: httpx.AsyncClient) -> None:
    session = new_session()
    assert (await send(http, session, "@count 1")).text() == counting(1)

    again = await http.post(
        f"/v1/sessions/{session}/submissions",
        json={"continueLastTurn": True, "concurrency": "steer"},
    )

    assert again.status_code == 422
    assert "steer" in again.text


# The command is a client of the HTTP API: one store is enough.
@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_the_cli_steers_a_running_answer_and_prints_the_answer_it_joined(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session = new_session()
    # Long enough for the command to start and send while the tool runs.
    answer = await start_tool_loop(http, session, '@tool wait {"seconds": 5}')

    status, out, err = await run_perdure(
        "chat", "--url", stack.url, "--session", session, "--steer", "-m", "@count 3 steered"
    )

    assert (status, out) == (0, counting(3) + "\n"), err
    streamed = await answer
    steered = [c for c in streamed.chunks if c["type"] == "data-steer"]
    assert [c["data"]["message"]["parts"][0]["text"] for c in steered] == ["@count 3 steered"]


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_the_cli_refuses_to_steer_without_a_chat_and_a_message(stack: Stack) -> None:
    status, _, err = await run_perdure("chat", "--url", stack.url, "--steer", "-m", "hi")

    assert status == 2
    assert "--steer goes with -m TEXT and --session ID" in err
