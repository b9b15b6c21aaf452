"""The stop storm: 50 chats at once, each stopped at a random moment of its turn.

Whatever the moment, the answer to the stop says what happened, and what it says holds: a
`stopped` turn's log ends with exactly one `abort` and its partial answer is stored; an
`already_finished` one ended as it would have. No session stays claimed, and every session
answers its next message. The counts per moment are printed (`pytest -s`)."""

import asyncio
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from perdure.testing.chat_client import chat_body, read_stream, send, user_message

SESSIONS = 50
ENDED = ("completed", "aborted", "error", "skipped")


@dataclass(frozen=True)
class Moment:
    text: str
    trigger: str | None
    """Stop when the stream shows this chunk type (None: as soon as the stream opens)."""
    delay: tuple[float, float] = (0.0, 0.0)
    """Then wait a random time in this range (seconds)."""
    agent: str = "default"
    nth: tuple[int, int] = (1, 1)
    """Stop at a random one of these occurrences of `trigger`; for `text-delta`, once the
    stream has shown that many numbers of the counting answer (under load the log joins a
    turn's deltas of one flush into one event: perdure/domain/delta_coalescing.py)."""


MOMENTS = {
    "before the first chunk": Moment("@ttft 1500 @count 20", None),
    "during text": Moment("@count 200 @delay 10", "text-delta", nth=(1, 60)),
    # The first tool-input delta is the only one sure to be an event of its own (later ones
    # may be joined).
    "while tool input streams": Moment(
        '@tool wait {"seconds": 0.5} @delay 150', "tool-input-delta"
    ),
    "while a tool runs": Moment(
        '@tool wait {"seconds": 4}', "tool-input-available", delay=(0.05, 1.0)
    ),
    "while parked on an approval": Moment(
        '@tool delete_file {"path": "/tmp/storm"}', "tool-approval-request", agent="approvals"
    ),
    "during a recovery attempt": Moment(
        "@count 120 @delay 15 @disconnect_after 10", "data-recovery", delay=(0.0, 0.3)
    ),
    "while the turn finishes": Moment(
        "@count 12 @delay 20", "text-delta", nth=(8, 12), delay=(0.0, 0.1)
    ),
}


@dataclass
class Stormed:
    moment: str
    session: str
    submission: str
    verdict: str
    status: str | None
    live: list[dict[str, Any]]
    """What the client's own stream carried."""


def occurrences(chunk: dict[str, Any]) -> int:
    """How many of its trigger a chunk is: a text delta counts the numbers it carries."""
    if chunk["type"] == "text-delta":
        return len(chunk["delta"].split())
    return 1


async def storm_one(http: httpx.AsyncClient, moment_name: str, rng: random.Random) -> Stormed:
    moment = MOMENTS[moment_name]
    session = f"storm-{uuid.uuid4().hex[:10]}"
    body = chat_body(
        session, user_message(f"{moment.text} {uuid.uuid4().hex[:6]}"), agent=moment.agent
    )
    nth = rng.randint(*moment.nth)
    delay = rng.uniform(*moment.delay)
    live: list[dict[str, Any]] = []
    stopping: asyncio.Task[httpx.Response] | None = None

    async def stop(submission: str) -> httpx.Response:
        await asyncio.sleep(delay)
        return await http.post(f"/api/chat/{session}/stop", params={"submissionId": submission})

    async with aconnect_sse(http, "POST", "/api/chat", json=body) as source:
        submission = source.response.headers["x-perdure-submission-id"]
        if moment.trigger is None:
            stopping = asyncio.create_task(stop(submission))
        seen = 0
        async for event in source.aiter_sse():
            if not event.data:
                continue
            if event.data == "[DONE]":
                break
            live.append(json.loads(event.data))
            if stopping is None and live[-1]["type"] == moment.trigger:
                seen += occurrences(live[-1])
                if seen >= nth:
                    stopping = asyncio.create_task(stop(submission))
    assert stopping is not None, f"{moment_name}: the stream never showed {moment.trigger}"
    stopped = await stopping
    assert stopped.status_code == 200, (moment_name, stopped.status_code, stopped.text)
    answer = stopped.json()
    assert answer["submissionId"] == submission
    return Stormed(moment_name, session, submission, answer["result"], answer["status"], live)


async def ended(http: httpx.AsyncClient, session: str, submission: str) -> str:
    for _ in range(1200):
        row = (await http.get(f"/v1/sessions/{session}/submissions/{submission}")).json()
        if row["status"] in ENDED:
            return str(row["status"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"submission {submission} still {row['status']} after 60 s")


async def idle(http: httpx.AsyncClient, session: str) -> None:
    for _ in range(1200):
        if (await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {session} still claimed after 60 s")


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


async def check(http: httpx.AsyncClient, stormed: Stormed) -> None:
    """What the stop's answer promised holds, and the session goes on."""
    where = f"{stormed.moment} ({stormed.submission})"
    status = await ended(http, stormed.session, stormed.submission)
    logged = (
        await read_stream(
            http,
            "GET",
            f"/v1/sessions/{stormed.session}/submissions/{stormed.submission}/stream",
            params={"after": -1},
        )
    ).chunks
    types = [chunk["type"] for chunk in logged]
    parked = stormed.moment == "while parked on an approval"
    if stormed.verdict == "stopped":
        assert status == "aborted", where
        assert types.count("abort") == 1 and types[-1] == "abort", (where, types)
        assert "error" not in types, (where, types)
        # A parked turn's stream ended at its park (`finish`, tool-calls); nothing else may.
        finishes = [c for c in logged if c["type"] == "finish"]
        assert all(parked and c.get("finishReason") == "tool-calls" for c in finishes), where
        if not parked:
            assert stormed.live == logged, where  # the client's own stream ended with abort
        stored = (await http.get(f"/api/chat/{stormed.session}/messages")).json()
        answers = [m for m in stored if m["id"] == logged[0]["messageId"]]
        if text_of(logged):
            (answer,) = answers
            assert answer["metadata"]["status"] == "aborted", where
            kept = "".join(p["text"] for p in answer["parts"] if p["type"] == "text")
            assert kept == text_of(logged), where  # the partial is kept, exactly
    else:
        assert stormed.verdict == "already_finished", (where, stormed.verdict)
        assert status == stormed.status, where
        assert status != "aborted" and "abort" not in types, (where, types)
    await idle(http, stormed.session)
    following = await send(http, stormed.session, "next one", agent="default")
    assert following.text() == "You said: next one", where


@pytest.mark.long
async def test_fifty_chats_stopped_at_random_moments_each_end_as_their_stop_answer_says(
    http: httpx.AsyncClient,
) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    names = [list(MOMENTS)[n % len(MOMENTS)] for n in range(SESSIONS)]
    rng.shuffle(names)

    stormed = await asyncio.gather(
        *(storm_one(http, name, random.Random(rng.random())) for name in names)
    )
    await asyncio.gather(*(check(http, each) for each in stormed))

    counts = {name: Counter(s.verdict for s in stormed if s.moment == name) for name in MOMENTS}
    print(f"\nstop storm (seed {seed}): {SESSIONS} sessions")
    for name, verdicts in counts.items():
        print(f"  {name:<28} " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())))
    # Nothing but the stop can end a turn parked on an approval.
    assert set(counts["while parked on an approval"]) == {"stopped"}
