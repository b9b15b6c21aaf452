"""A deploy: both workers of a task queue are restarted one after the other with SIGTERM while
several answers stream, two per provider API. Each stopping worker lets its activities run for
the grace period, then hands the unfinished ones over; every answer is still exactly the full
count, each turn stores one assistant message and ends completed."""

import asyncio
import re
import uuid

import httpx
import pytest

from perdure.testing.cluster import (
    Cluster,
    CountingTurn,
    rolling_restart,
    stored_answer_problems,
    wait_until,
)
from perdure.testing.fakeprovider.server import FakeProvider

TURNS = 6
AGENTS = [None, "responses", "anthropic"]
"""Chat Completions (the default agent), OpenAI Responses in background mode, Anthropic."""
COUNT = 200
DELAY_MS = 50
"""10 s of answer at 20 tokens/s: the first worker is stopped a second in and its 2 s grace
period ends while every answer streams."""
GRACE = {"PERDURE_WORKER_SHUTDOWN_GRACE": "2"}


def _handed_over(log: str) -> int:
    """The activities a worker's shutdown handed over (still running after the grace period),
    as it logged them."""
    found = re.search(r"; (\d+) activities handed over to other workers", log)
    assert found, f"the worker did not log its shutdown:\n{log}"
    return int(found.group(1))


@pytest.mark.timeout(90)
async def test_a_rolling_restart_of_every_worker_loses_and_repeats_nothing(
    cluster: Cluster, fake_provider: FakeProvider
) -> None:
    async with cluster.temporal():
        first = [cluster.worker(**GRACE), cluster.worker(**GRACE)]
        url = await cluster.gateway()
        for worker in first:
            await cluster.wait_polling(worker)
        tag = uuid.uuid4().hex[:6]
        turns = [
            CountingTurn(f"rolling-{tag}-{n}", COUNT, DELAY_MS, agent=AGENTS[n % len(AGENTS)])
            for n in range(TURNS)
        ]
        limits = httpx.Limits(max_connections=TURNS + 10)
        async with httpx.AsyncClient(base_url=url, timeout=90, limits=limits) as http:
            streaming = [asyncio.create_task(turn.run(http)) for turn in turns]
            await wait_until(lambda: all(turn.stream.deltas() >= 20 for turn in turns))
            await rolling_restart(cluster, first, **GRACE)
            codes = [await worker.wait_exit(30) for worker in first]
            await asyncio.wait_for(asyncio.gather(*streaming), timeout=60)
            stored = [await stored_answer_problems(http, turn) for turn in turns]

    problems = {
        turn.session: turn.errors() + turn.corruption() + found
        for turn, found in zip(turns, stored, strict=True)
        if turn.errors() or turn.corruption() or found
    }
    assert not problems, f"{problems}\n{cluster.logs()}"
    assert codes == [0, 0], cluster.logs()
    for worker in first:
        log = worker.output()
        assert "worker shutting down: polling stopped" in log
        assert "worker stopped after" in log
    # The restarts landed mid-stream: answers were handed over and continued, never retried
    # once text was streamed. (A retry before the first text is an ordinary recovery: on an
    # overloaded machine a first attempt can miss its heartbeat before the provider answers.)
    recoveries = [notice for turn in turns for notice in turn.recoveries()]
    assert any(notice["data"].get("kind") == "continue" for notice in recoveries), (
        f"no answer was still streaming when a grace period ended: {recoveries}\n{cluster.logs()}"
    )
    retried_after_text = {
        turn.session: kinds
        for turn in turns
        if ("retry", True) in (kinds := turn.stream.recovery_kinds())
    }
    assert retried_after_text == {}
    # The first worker stops a second into 10 s answers: it hands them over. Which worker
    # runs which answer is Temporal's choice, and on a loaded machine the second may stop when
    # its answers are ending: those finish within its grace period, and it hands over none.
    # Each worker names every activity it handed over.
    handed = [_handed_over(worker.output()) for worker in first]
    assert any(handed), cluster.logs()
    for worker, count in zip(first, handed, strict=True):
        named = worker.output().count("handed over: Temporal retries it")
        assert named == count, worker.output()
    # A hand-over is not a stop: a background response runs on at the provider, and the next
    # attempt re-attaches to it (`starting_after`) instead of generating the rest again.
    # Only a retry before the first text can create another (if no response id was recorded).
    for turn in (turn for turn in turns if turn.agent == "responses"):
        requested = [request.route for request in fake_provider.requests_for(turn.user_text)]
        early_retries = turn.stream.recovery_kinds().count(("retry", False))
        assert "responses.cancel" not in requested, f"{turn.session} cancelled: {requested}"
        assert 1 <= requested.count("responses") <= 1 + early_retries, (
            f"{turn.session} regenerated: {requested}"
        )
