"""A stop is recorded in the store before it is answered, and every path honours it."""

import asyncio
import json
import uuid

import httpx
from httpx_sse import aconnect_sse

from perdure.testing.chat_client import Streamed, chat_body, key_of, send, user_message
from perdure.testing.stack import Stack
from storage.db import Database
from storage.intake import submit
from storage.stops import decide_ending, record_stop
from storage.submission_reads import get_submission
from storage.tables import ChatSessionRow
from tests.e2e.test_chat_turn import wait_for_text, wait_idle
from tests.fakeprovider_fixtures import FakeProvider
from tests.submitting import user_submission


def new_session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


async def stream_until(
    http: httpx.AsyncClient,
    session: str,
    text: str,
    chunk_type: str,
    then: "asyncio.Event",
    agent: str | None = None,
) -> list[dict]:
    """Send `text` (to `agent`); set `then` when the stream shows `chunk_type`; return every
    chunk."""
    chunks: list[dict] = []
    body = chat_body(session, user_message(text), **({"agent": agent} if agent else {}))
    async with aconnect_sse(http, "POST", "/api/chat", json=body) as source:
        async for event in source.aiter_sse():
            if not event.data:
                continue
            if event.data == "[DONE]":
                break
            chunks.append(json.loads(event.data))
            if chunks[-1]["type"] == chunk_type:
                then.set()
    return chunks


async def test_a_stop_answers_stopped_with_the_running_submission(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    streaming = asyncio.create_task(send(http, session, "@count 400 @delay 10"))
    await wait_for_text(http, session)

    stopped = await http.post(f"/api/chat/{session}/stop")
    streamed: Streamed = await streaming

    assert stopped.json() == {
        "result": "stopped",
        "submissionId": streamed.headers["x-perdure-submission-id"],
        "status": "running",
    }
    assert [t for t in streamed.types() if t in ("abort", "finish", "error")] == ["abort"]


async def test_a_stop_of_a_submission_that_ended_answers_already_finished(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    streamed = await send(http, session, "@count 3")
    submission = streamed.headers["x-perdure-submission-id"]

    stopped = await http.post(f"/api/chat/{session}/stop", params={"submissionId": submission})

    assert stopped.status_code == 200
    assert stopped.json() == {
        "result": "already_finished",
        "submissionId": submission,
        "status": "completed",
    }


async def test_a_stop_in_an_idle_session_answers_nothing_running(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    await send(http, session, "@count 3")

    stopped = await http.post(f"/api/chat/{session}/stop")

    assert stopped.json() == {"result": "nothing_running", "submissionId": None, "status": None}


async def test_a_stop_naming_a_submission_of_another_session_is_a_404(
    http: httpx.AsyncClient,
) -> None:
    first, second = new_session(), new_session()
    submission = (await send(http, first, "@count 3")).headers["x-perdure-submission-id"]
    await send(http, second, "@count 3")

    stopped = await http.post(f"/api/chat/{second}/stop", params={"submissionId": submission})

    assert stopped.status_code == 404
    assert stopped.json()["error"]["code"] == "submission_not_found"


async def test_a_stop_whose_cancellation_never_reached_temporal_ends_the_turn_at_its_next_step(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    """As when the gateway dies between recording the stop and cancelling the workflow: the
    tool step and the next model step refuse to start."""
    session = new_session()
    tool_seen = asyncio.Event()
    streaming = asyncio.create_task(
        stream_until(http, session, '@tool wait {"seconds": 1}', "tool-input-available", tool_seen)
    )
    await asyncio.wait_for(tool_seen.wait(), 30)

    record = await record_stop(stack.services.db, session_id=key_of(session), submission_id=None)
    chunks = await streaming

    assert record.verdict == "stopped"
    assert chunks[-1] == {"type": "abort", "reason": "user-cancelled"}
    # The tool ran, or was refused when it had not started yet; no model step ran after it.
    settled = [c["type"] for c in chunks if c["type"].startswith("tool-output")]
    assert settled in (["tool-output-available"], ["tool-output-error"])
    assert [c["type"] for c in chunks].count("start-step") == 1
    following = await send(http, session, "and now?")
    assert following.text() == "You said: and now?"


async def test_a_stop_recorded_before_a_step_failed_is_not_undone_by_its_recovery(
    http: httpx.AsyncClient, stack: Stack, fake_provider: FakeProvider
) -> None:
    """The retried step reads the stop first: no recovery attempt, no second provider call."""
    session = new_session()
    text = f"@count 60 @delay 40 @disconnect_after 20 {uuid.uuid4().hex[:8]}"
    streaming = asyncio.create_task(send(http, session, text))
    await wait_for_text(http, session)

    await record_stop(stack.services.db, session_id=key_of(session), submission_id=None)
    streamed = await streaming

    assert streamed.types()[-1] == "abort"
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    assert not [e for e in events if e["type"] == "chat.recovery.attempt"]
    assert len(fake_provider.requests_for(text)) == 1
    await wait_idle(http, session)


async def recorded_submission(db: Database) -> tuple[str, str]:
    session = new_session()
    outcome = await submit(
        db,
        user_submission(session, "hello", key=f"k-{session}"),
    )
    return outcome.submission.session_id, outcome.submission.id


async def test_a_stop_recorded_before_the_ending_is_decided_turns_a_completion_into_an_abort(
    store: Database,
) -> None:
    session_id, submission_id = await recorded_submission(store)

    record = await record_stop(store, session_id=session_id, submission_id=None)
    ending = (await decide_ending(store, submission_id=submission_id, proposed="completed")).ending

    assert (record.verdict, ending) == ("stopped", "aborted")


async def test_a_stop_after_the_ending_is_decided_answers_already_finished(
    store: Database,
) -> None:
    session_id, submission_id = await recorded_submission(store)

    ending = (await decide_ending(store, submission_id=submission_id, proposed="exhausted")).ending
    record = await record_stop(store, session_id=session_id, submission_id=submission_id)

    assert (ending, record.verdict) == ("exhausted", "already_finished")
    assert record.submission is not None and record.submission.cancel_requested_at is None


async def test_a_repeated_finish_gets_the_first_decision(store: Database) -> None:
    session_id, submission_id = await recorded_submission(store)
    await decide_ending(store, submission_id=submission_id, proposed="completed")
    await record_stop(store, session_id=session_id, submission_id=None)

    again = (await decide_ending(store, submission_id=submission_id, proposed="completed")).ending

    assert again == "completed"


async def test_a_stop_while_the_running_turn_finishes_never_reaches_the_queued_one(
    store: Database,
) -> None:
    session_id, running = await recorded_submission(store)
    chat = await store.read_sync(lambda session: session.get(ChatSessionRow, session_id))
    assert chat is not None
    queued = await submit(
        store,
        user_submission(chat.chat_id, "next", key=f"k-{chat.chat_id}-next"),
    )
    await decide_ending(store, submission_id=running, proposed="completed")

    record = await record_stop(store, session_id=session_id, submission_id=None)

    assert record.verdict == "already_finished"
    assert record.submission is not None and record.submission.id == running
    follow_up = await get_submission(store, queued.submission.id)
    assert follow_up is not None and follow_up.cancel_requested_at is None


async def test_a_stop_recorded_while_the_first_steps_hook_runs_ends_the_turn_before_any_request(
    http: httpx.AsyncClient, stack: Stack, fake_provider: FakeProvider
) -> None:
    """As when the gateway dies between recording the stop and cancelling the workflow, while
    the agent's slow `on_turn_start` runs: no provider request leaves."""
    session = new_session()
    text = f"@count 5 {session}"
    started = asyncio.Event()
    streaming = asyncio.create_task(
        stream_until(http, session, text, "start", started, agent="slow-start")
    )
    await asyncio.wait_for(started.wait(), 30)  # the step opened the answer; its hook sleeps

    record = await record_stop(stack.services.db, session_id=key_of(session), submission_id=None)
    chunks = await streaming

    assert record.verdict == "stopped"
    assert chunks[-1] == {"type": "abort", "reason": "user-cancelled"}
    assert fake_provider.requests_for(text) == []
