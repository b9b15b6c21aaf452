"""An SSE event id (`<submission id>:<seq>`) names its turn: a cursor from an earlier turn
never skips the start of a newer one."""

import asyncio
import uuid

import httpx

from perdure.testing.chat_client import counting, read_stream, send


async def test_a_last_event_id_from_an_earlier_turn_resumes_the_newer_turn_from_its_start(
    http: httpx.AsyncClient,
) -> None:
    session = f"ids-{uuid.uuid4().hex[:8]}"
    earlier = await send(http, session, "@count 30")
    newer = asyncio.create_task(send(http, session, "@count 120 @delay 10"))
    try:
        await wait_past(http, session, numbers=len(earlier.events) + 5)

        resumed = await read_stream(
            http,
            "GET",
            f"/api/chat/{session}/stream",
            headers={"Last-Event-ID": earlier.last_event_id},
        )
        live = await newer
    finally:
        newer.cancel()

    assert resumed.headers["x-perdure-submission-id"] == live.headers["x-perdure-submission-id"]
    assert resumed.headers["x-perdure-submission-id"] != earlier.headers["x-perdure-submission-id"]
    assert resumed.ids[0] == 0
    assert resumed.chunks[0] == live.chunks[0]
    assert resumed.chunks[0]["type"] == "start"
    assert resumed.text() == counting(120)
    assert resumed.events == live.events


async def test_an_event_id_of_the_running_turn_resumes_right_after_it(
    http: httpx.AsyncClient,
) -> None:
    session = f"ids-{uuid.uuid4().hex[:8]}"
    first = await send(http, session, "@count 80 @delay 5", stop_at_count=12)

    rest = await read_stream(
        http, "GET", f"/api/chat/{session}/stream", headers={"Last-Event-ID": first.last_event_id}
    )

    assert rest.ids[0] == first.ids[-1] + 1
    assert first.text() + rest.text() == counting(80)


async def wait_past(http: httpx.AsyncClient, session: str, *, numbers: int) -> None:
    """Until the running answer has counted to `numbers` (its seq is then past that)."""
    for _ in range(500):
        history = (await http.get(f"/api/chat/{session}/messages")).json()
        answer = history[-1]
        if answer["role"] == "assistant" and answer["metadata"]["status"] == "streaming":
            text = "".join(p.get("text", "") for p in answer["parts"] if p["type"] == "text")
            if len(text.split()) >= numbers:
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the running answer did not count to {numbers} within 10 s")


async def test_the_id_of_a_finished_answers_closing_event_ends_the_resume_at_once(
    http: httpx.AsyncClient,
) -> None:
    session = f"ids-{uuid.uuid4().hex[:8]}"
    finished = await send(http, session, "@count 5")

    rest = await asyncio.wait_for(
        read_stream(
            http,
            "GET",
            f"/api/chat/{session}/stream",
            headers={"Last-Event-ID": finished.last_event_id},
        ),
        timeout=5,
    )

    assert rest.status == 200
    assert rest.events == []
    assert rest.done


async def test_an_event_id_past_the_end_of_its_answer_is_a_400(http: httpx.AsyncClient) -> None:
    session = f"ids-{uuid.uuid4().hex[:8]}"
    finished = await send(http, session, "@count 5")
    submission = finished.headers["x-perdure-submission-id"]

    response = await http.get(
        f"/api/chat/{session}/stream", headers={"Last-Event-ID": f"{submission}:999"}
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_cursor"


async def test_a_bare_seq_past_the_end_of_the_answer_replays_it_from_its_start(
    http: httpx.AsyncClient,
) -> None:
    session = f"ids-{uuid.uuid4().hex[:8]}"
    finished = await send(http, session, "@count 5")

    replay = await asyncio.wait_for(
        read_stream(http, "GET", f"/api/chat/{session}/stream", headers={"Last-Event-ID": "999"}),
        timeout=5,
    )

    assert replay.events == finished.events
    assert replay.done
