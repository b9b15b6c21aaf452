"""Durable submissions: accepted before any inference, idempotent, FIFO, cancellable,
readable by id, and deletable once ended."""

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import counting, read_stream, user_message
from perdure.testing.fakeprovider.server import FakeProvider


def new_session() -> str:
    return f"subm-{uuid.uuid4().hex[:12]}"


async def submit(
    http: httpx.AsyncClient, session: str, *texts: str, **options: Any
) -> httpx.Response:
    body = {"messages": [user_message(text) for text in texts], **options}
    return await http.post(f"/v1/sessions/{session}/submissions", json=body)


async def ended(http: httpx.AsyncClient, session: str, submission_id: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            row: dict[str, Any] = (
                await http.get(f"/v1/sessions/{session}/submissions/{submission_id}")
            ).json()
            if row["status"] not in ("pending", "running"):
                return row
            await asyncio.sleep(0.05)


async def test_a_submission_is_accepted_at_once_and_its_stream_is_readable_by_its_id(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    accepted = await submit(http, session, "@count 5 @delay 20", metadata={"source": "cron"})
    body = accepted.json()
    streamed = await read_stream(
        http, "GET", f"/v1/sessions/{session}/submissions/{body['submissionId']}/stream"
    )

    assert accepted.status_code == 202
    assert body["accepted"] is True
    assert body["status"] in ("pending", "running")
    assert body["metadata"] == {"source": "cron"}
    assert streamed.text() == counting(5)
    assert (await ended(http, session, body["submissionId"]))["status"] == "completed"


async def test_the_same_key_returns_the_same_submission_and_an_id_naming_another_is_409(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    first = (await submit(http, session, "@count 2", idempotencyKey="k1")).json()

    again = (await submit(http, session, "@count 2", idempotencyKey="k1")).json()
    clash = await submit(http, session, "@count 2", idempotencyKey="k1", submissionId="other-id")
    named = (await submit(http, session, "@count 3", submissionId=f"mine-{session}")).json()
    named_again = await submit(http, session, "@count 3", submissionId=f"mine-{session}")

    assert again["submissionId"] == first["submissionId"]
    assert again["accepted"] is False
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "submission_conflict"
    assert named["submissionId"] == f"mine-{session}"
    assert named_again.json()["accepted"] is False


async def test_a_key_and_an_id_naming_two_different_submissions_is_409_and_records_nothing(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    by_key = (await submit(http, session, "@count 2", idempotencyKey="k1")).json()
    by_id = (
        await submit(
            http, session, "@count 2", idempotencyKey="k2", submissionId=f"named-{session}"
        )
    ).json()

    clash = await submit(
        http, session, "@count 2", idempotencyKey="k1", submissionId=by_id["submissionId"]
    )

    assert by_key["submissionId"] != by_id["submissionId"]
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "submission_conflict"
    listed = (await http.get(f"/v1/sessions/{session}/submissions")).json()
    assert sorted(s["submissionId"] for s in listed["data"]) == sorted(
        [by_key["submissionId"], by_id["submissionId"]]
    )


async def test_wait_answers_when_the_turn_has_ended(http: httpx.AsyncClient) -> None:
    response = await submit(http, new_session(), "@count 3", wait=True, waitSeconds=30)

    assert response.status_code == 200
    assert response.json()["status"] == "completed"


async def test_several_messages_join_the_transcript_in_order_and_one_turn_answers_them(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()

    response = await submit(http, session, "first note", "@count 2", wait=True)
    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert response.json()["status"] == "completed"
    assert [m["role"] for m in history] == ["user", "user", "assistant"]
    assert [m["id"] for m in history[:2]] == response.json()["userMessageIds"]
    assert history[2]["parts"][-1]["text"] == counting(2)


async def test_a_queued_submission_joins_the_transcript_only_when_its_turn_starts(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = (await submit(http, session, "@count 40 @delay 25")).json()
    queued = (await submit(http, session, "@count 2 later")).json()

    during = (await http.get(f"/api/chat/{session}/messages")).json()
    await ended(http, session, queued["submissionId"])
    after = (await http.get(f"/api/chat/{session}/messages")).json()

    assert queued["status"] == "pending"
    assert [m["id"] for m in during if m["role"] == "user"] == running["userMessageIds"]
    assert [m["id"] for m in after if m["role"] == "user"] == (
        running["userMessageIds"] + queued["userMessageIds"]
    )


async def test_a_cancelled_queued_submission_never_runs_and_the_next_one_does(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = (await submit(http, session, "@count 30 @delay 25")).json()
    doomed = (await submit(http, session, "@count 2 doomed")).json()
    following = (await submit(http, session, "@count 3")).json()

    cancelled = await http.post(
        f"/v1/sessions/{session}/submissions/{doomed['submissionId']}/cancel"
    )
    again = await http.post(f"/v1/sessions/{session}/submissions/{doomed['submissionId']}/cancel")

    assert cancelled.status_code == 200
    assert cancelled.json()["cancelRequested"] is True
    assert again.status_code == 200
    assert (await ended(http, session, doomed["submissionId"]))["status"] == "aborted"
    assert (await ended(http, session, following["submissionId"]))["status"] == "completed"
    assert (await ended(http, session, running["submissionId"]))["status"] == "completed"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    user_ids = [m["id"] for m in history if m["role"] == "user"]
    assert doomed["userMessageIds"][0] not in user_ids
    assert following["userMessageIds"][0] in user_ids


async def test_cancelling_a_running_submission_stops_it_and_keeps_the_partial(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    running = (await submit(http, session, "@count 300 @delay 20")).json()
    await read_stream(
        http,
        "GET",
        f"/v1/sessions/{session}/submissions/{running['submissionId']}/stream",
        stop_after=8,
    )

    await http.post(f"/v1/sessions/{session}/submissions/{running['submissionId']}/cancel")

    assert (await ended(http, session, running["submissionId"]))["status"] == "aborted"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert history[-1]["metadata"]["status"] == "aborted"


async def test_cancelling_an_ended_submission_is_409(http: httpx.AsyncClient) -> None:
    session = new_session()
    done = (await submit(http, session, "@count 1", wait=True)).json()

    response = await http.post(f"/v1/sessions/{session}/submissions/{done['submissionId']}/cancel")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "submission_ended"


async def test_submissions_are_listed_in_queue_order_with_a_status_filter(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    ids = [
        (await submit(http, session, f"@count 1 n{i}", wait=True)).json()["submissionId"]
        for i in range(3)
    ]

    everything = (await http.get(f"/v1/sessions/{session}/submissions")).json()
    page = (await http.get(f"/v1/sessions/{session}/submissions?limit=1&offset=1")).json()
    none_running = (await http.get(f"/v1/sessions/{session}/submissions?status=running")).json()

    assert [s["submissionId"] for s in everything["data"]] == ids
    assert everything["count"] == 3
    assert [s["submissionId"] for s in page["data"]] == ids[1:2]
    assert none_running == {"data": [], "count": 0}


async def test_ended_submissions_are_deleted_and_their_messages_stay(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    done = (await submit(http, session, "@count 2", wait=True)).json()
    before = datetime.now(UTC).isoformat()

    deleted = await http.delete(
        f"/v1/sessions/{session}/submissions", params={"completedBefore": before}
    )

    assert deleted.json() == {"deleted": 1}
    gone = await http.get(f"/v1/sessions/{session}/submissions/{done['submissionId']}")
    assert gone.status_code == 404
    assert len((await http.get(f"/api/chat/{session}/messages")).json()) == 2


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": [{"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}]},
        {"messages": [user_message("x")], "submissionId": "has space"},
        {"messages": [user_message("x")], "metadata": {"blob": "x" * 20_000}},
        {"messages": [user_message("x"), user_message("y", "same"), user_message("z", "same")]},
        {"messages": [user_message("x")], "waitSeconds": 301},
        {"messages": [user_message("x")], "unknown": 1},
    ],
)
async def test_an_invalid_submission_is_refused_and_nothing_is_stored(
    http: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    session = new_session()

    response = await http.post(f"/v1/sessions/{session}/submissions", json=body)

    assert response.status_code == 422, response.text
    assert (await http.get(f"/v1/sessions/{session}")).status_code == 404


async def test_clearing_a_session_stops_its_turn_skips_the_queued_and_starts_afresh(
    http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    session = new_session()
    running = (await submit(http, session, "@count 300 @delay 20")).json()
    queued = [(await submit(http, session, f"@count 2 q{i}")).json() for i in range(2)]

    cleared = (await http.post(f"/v1/sessions/{session}/clear")).json()
    statuses = [
        (await ended(http, session, s["submissionId"]))["status"] for s in [running, *queued]
    ]
    fresh_text = f"@count 3 fresh {session}"
    fresh = (await submit(http, session, fresh_text, wait=True)).json()

    assert cleared == {
        "stoppedSubmissionId": running["submissionId"],
        "skippedSubmissionIds": [s["submissionId"] for s in queued],
    }
    assert statuses == ["aborted", "skipped", "skipped"]
    assert fresh["status"] == "completed"
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    assert [m["id"] for m in history][:1] == fresh["userMessageIds"]
    (request,) = fake_provider.requests_for(fresh_text)
    assert [m["role"] for m in request.body["messages"] if m["role"] != "system"] == ["user"]


async def test_continue_last_turn_goes_on_from_the_last_answer(
    http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    session = new_session()
    text = f"@count 3 continue {session}"
    await submit(http, session, text, wait=True)

    continued = await http.post(
        f"/v1/sessions/{session}/submissions", json={"continueLastTurn": True, "wait": True}
    )
    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert continued.json()["status"] == "completed"
    assert [m["role"] for m in history] == ["user", "assistant", "assistant"]
    assert history[2]["id"] == continued.json()["assistantMessageId"]
    last_request = fake_provider.requests_for(text)[-1]
    assert last_request.body["messages"][-1]["role"] == "assistant"


async def test_continue_last_turn_needs_an_answer_to_continue(http: httpx.AsyncClient) -> None:
    refused = await http.post(
        f"/v1/sessions/{new_session()}/submissions", json={"continueLastTurn": True}
    )
    both = await http.post(
        f"/v1/sessions/{new_session()}/submissions",
        json={"continueLastTurn": True, "messages": [user_message("x")]},
    )

    assert refused.status_code == 409
    assert both.status_code == 422
