"""What a message sent while its session's turn runs does: the concurrency strategies, per
request and per agent."""

import asyncio
import uuid
from typing import Any

import httpx

from perdure.testing.chat_client import chat_body, counting, read_stream, send, user_message

LONG = "@count 100 @delay 20"
"""Two seconds of streaming: time enough to send the next message while it runs."""


def new_session() -> str:
    return f"conc-{uuid.uuid4().hex[:12]}"


async def start_long_turn(http: httpx.AsyncClient, session: str, **extra: Any) -> str:
    """A turn that streams for seconds; returns once it has streamed a little."""
    partial = await send(http, session, LONG, stop_after=6, **extra)
    return partial.headers["x-perdure-submission-id"]


async def status_of(http: httpx.AsyncClient, session: str, submission_id: str) -> str:
    async with asyncio.timeout(30):
        while True:
            row = (await http.get(f"/v1/sessions/{session}/submissions/{submission_id}")).json()
            if row["status"] not in ("pending", "running"):
                return str(row["status"])
            await asyncio.sleep(0.05)


async def user_texts(http: httpx.AsyncClient, session: str) -> list[str]:
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    return [m["parts"][0]["text"] for m in history if m["role"] == "user"]


async def test_reject_refuses_a_message_while_a_turn_runs_and_stores_nothing(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    refused = await send(http, session, "@count 2 refused", concurrency="reject")

    assert refused.status == 409
    assert await status_of(http, session, running) == "completed"
    assert await user_texts(http, session) == [LONG]


async def test_an_agent_may_reject_by_default(http: httpx.AsyncClient) -> None:
    session = new_session()
    await start_long_turn(http, session, agent="strict")

    refused = await send(http, session, "@count 2 refused")
    queued_anyway = await send(http, session, "@count 2 queued", concurrency="queue")

    assert refused.status == 409
    assert queued_anyway.text() == counting(2)


async def test_drop_records_the_message_as_skipped_and_never_runs_it(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    dropped = await send(http, session, "@count 2 dropped", concurrency="drop")

    assert dropped.types() == ["start", "abort"]
    dropped_id = dropped.headers["x-perdure-submission-id"]
    assert await status_of(http, session, dropped_id) == "skipped"
    assert await status_of(http, session, running) == "completed"
    assert await user_texts(http, session) == [LONG]


async def test_latest_skips_every_earlier_queued_message(http: httpx.AsyncClient) -> None:
    session = new_session()
    running = await start_long_turn(http, session)
    earlier = await http.post(
        f"/v1/sessions/{session}/submissions",
        json={
            "messages": [
                {"id": "e1", "role": "user", "parts": [{"type": "text", "text": "@count 1 e"}]}
            ]
        },
    )

    latest = await send(http, session, "@count 3 latest", concurrency="latest")

    assert latest.text() == counting(3)
    assert await status_of(http, session, earlier.json()["submissionId"]) == "skipped"
    assert await status_of(http, session, running) == "completed"
    assert await user_texts(http, session) == [LONG, "@count 3 latest"]


async def test_interrupt_stops_the_running_turn_keeping_its_partial_then_answers(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    answered = await send(http, session, "@count 2 now", concurrency="interrupt")

    assert answered.text() == counting(2)
    assert await status_of(http, session, running) == "aborted"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["metadata"]["status"] == "aborted"


async def test_rollback_stops_the_running_turn_and_takes_it_off_the_transcript(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    answered = await send(http, session, "@count 2 instead", concurrency="rollback")

    assert answered.text() == counting(2)
    assert await status_of(http, session, running) == "aborted"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [(m["role"], m["parts"][-1].get("text")) for m in history] == [
        ("user", "@count 2 instead"),
        ("assistant", counting(2)),
    ]


async def test_an_unknown_strategy_is_refused(http: httpx.AsyncClient) -> None:
    refused = await send(http, new_session(), "@count 1", concurrency="coalesce")

    assert refused.status == 422


async def submit(
    http: httpx.AsyncClient, session: str, text: str, **options: Any
) -> dict[str, Any]:
    """A submission through the submissions API (answered at once, before any inference)."""
    message_id = f"u-{uuid.uuid4().hex[:8]}"
    response = await http.post(
        f"/v1/sessions/{session}/submissions",
        json={
            "messages": [
                {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}
            ],
            **options,
        },
    )
    assert response.status_code == 202, response.text
    return dict(response.json())


async def submission(http: httpx.AsyncClient, session: str, submission_id: str) -> dict[str, Any]:
    await status_of(http, session, submission_id)
    response = await http.get(f"/v1/sessions/{session}/submissions/{submission_id}")
    return dict(response.json())


async def roles(http: httpx.AsyncClient, session: str) -> list[str]:
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    return [m["role"] for m in history]


async def test_merge_answers_the_queued_messages_and_its_own_in_one_turn(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)
    first = await submit(http, session, "@count 1 first")
    second = await submit(http, session, "@count 1 second")

    merged = await send(http, session, "@count 3 merged", concurrency="merge")

    assert merged.text() == counting(3)
    assert await status_of(http, session, running) == "completed"
    assert await user_texts(http, session) == [
        LONG,
        "@count 1 first",
        "@count 1 second",
        "@count 3 merged",
    ]
    assert await roles(http, session) == ["user", "assistant", "user", "user", "user", "assistant"]
    merged_id = merged.headers["x-perdure-submission-id"]
    for taken in (first, second):
        row = await submission(http, session, taken["submissionId"])
        assert (row["status"], row["mergedInto"]) == ("skipped", merged_id)


async def test_a_merged_submissions_stream_says_which_turn_answers_it(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await start_long_turn(http, session)
    queued = await submit(http, session, "@count 1 queued")

    merged = await send(http, session, "@count 2 merged", concurrency="merge")
    stream = await read_stream(
        http, "GET", f"/v1/sessions/{session}/submissions/{queued['submissionId']}/stream"
    )

    merged_id = merged.headers["x-perdure-submission-id"]
    assert stream.chunks[-1] == {"type": "abort", "reason": f"merged into submission {merged_id}"}


async def test_merge_runs_at_once_when_the_session_is_idle(http: httpx.AsyncClient) -> None:
    streamed = await send(http, new_session(), "@count 2", concurrency="merge")

    assert streamed.text() == counting(2)


async def test_debounce_answers_a_burst_of_messages_once_after_the_quiet_period(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    options = {"concurrency": "debounce", "debounceMs": 1500}
    first = await submit(http, session, "@count 1 first", **options)
    second = await submit(http, session, "@count 2 second", **options)

    answered = await submission(http, session, second["submissionId"])

    assert answered["status"] == "completed"
    assert answered["startedAt"] >= answered["notBefore"]
    assert (await submission(http, session, first["submissionId"]))["mergedInto"] == (
        second["submissionId"]
    )
    assert await user_texts(http, session) == ["@count 1 first", "@count 2 second"]
    assert await roles(http, session) == ["user", "user", "assistant"]


async def test_debounce_behind_a_running_turn_starts_when_that_turn_ends(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = await start_long_turn(http, session)

    debounced = await send(http, session, "@count 2 later", concurrency="debounce", debounceMs=50)

    assert debounced.text() == counting(2)
    assert await status_of(http, session, running) == "completed"
    assert await roles(http, session) == ["user", "assistant", "user", "assistant"]


async def test_an_agent_may_debounce_by_default(http: httpx.AsyncClient) -> None:
    session = new_session()
    first = await submit(http, session, "@count 1 first", agent="debouncing")
    second = await submit(http, session, "@count 2 second")

    answered = await submission(http, session, second["submissionId"])

    assert answered["status"] == "completed"
    assert (await submission(http, session, first["submissionId"]))["status"] == "skipped"
    assert await roles(http, session) == ["user", "user", "assistant"]


async def test_a_debounce_period_without_the_debounce_strategy_is_refused(
    http: httpx.AsyncClient,
) -> None:
    refused = await http.post(
        "/api/chat",
        json=chat_body(new_session(), user_message("@count 1"), concurrency="merge", debounceMs=9),
    )

    assert refused.status_code == 422
    assert "debounceMs" in refused.text


async def test_a_debounce_period_over_a_minute_is_refused(http: httpx.AsyncClient) -> None:
    refused = await send(http, new_session(), "@count 1", concurrency="debounce", debounceMs=60_001)

    assert refused.status == 422


async def test_a_strategy_changes_nothing_when_the_session_is_idle(
    http: httpx.AsyncClient,
) -> None:
    streamed = await send(http, new_session(), "@count 2", concurrency="reject")

    assert streamed.text() == counting(2)


async def test_the_running_turns_stream_ends_with_abort_when_it_is_interrupted(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    partial = await send(http, session, LONG, stop_after=6)

    await send(http, session, "@count 1 next", concurrency="interrupt")
    rest = await read_stream(
        http,
        "GET",
        f"/v1/sessions/{session}/submissions/{partial.headers['x-perdure-submission-id']}/stream",
        headers={"Last-Event-ID": partial.last_event_id},
    )

    assert rest.chunks[-1] == {"type": "abort", "reason": "user-cancelled"}
