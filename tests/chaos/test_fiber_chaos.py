"""Chaos for durable fibers with real processes: a worker SIGKILLed while a fiber counts to
1,000 (a stash every 100). The fiber is recovered on another worker from its last stash — it
loses at most the work since that stash — and ends with the exact result; a fiber older than
its maximum age is not recovered but ends `error`, saying so."""

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.testing.cluster import Cluster

COUNT = 1000
STASH_EVERY = 100


async def fiber_state(http: httpx.AsyncClient, fiber_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/fibers/{fiber_id}")
    assert response.status_code == 200, response.text
    state: dict[str, Any] = response.json()
    return state


async def until(
    http: httpx.AsyncClient, fiber_id: str, done: Any, timeout: float = 90
) -> dict[str, Any]:
    """The fiber's state once `done(state)` holds (polled; bounded)."""
    async with asyncio.timeout(timeout):
        while not done(state := await fiber_state(http, fiber_id)):
            await asyncio.sleep(0.05)
    return state


def counted(record: Path) -> list[tuple[int, int]]:
    """(attempt, n) of every number the fiber counted, in order."""
    return [
        (int(attempt), int(n))
        for attempt, n in (line.split() for line in record.read_text().splitlines())
    ]


async def test_a_fiber_on_a_killed_worker_goes_on_from_its_last_stash_to_the_exact_result(
    cluster: Cluster, tmp_path: Path
) -> None:
    record = tmp_path / "counted.txt"
    hooks = tmp_path / "recovered.jsonl"
    async with cluster.temporal():
        first = cluster.worker(PERDURE_TEST_FIBER_HOOKS=str(hooks))
        await cluster.wait_polling(first)
        url = await cluster.gateway()
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            payload = {
                "to": COUNT,
                "stash_every": STASH_EVERY,
                "delay_ms": 10,
                "record": str(record),
            }
            started = await http.post(
                "/v1/fibers", json={"agent": "fibers", "name": "count", "payload": payload}
            )
            fiber_id = started.json()["fiberId"]
            await until(http, fiber_id, lambda s: (s["snapshot"] or {}).get("n", 0) >= 300)
            first.kill()
            cluster.worker(PERDURE_TEST_FIBER_HOOKS=str(hooks))
            fiber = await until(http, fiber_id, lambda s: s["status"] != "running")
            events = (await http.get(f"/v1/fibers/{fiber_id}/events")).json()

    assert fiber["status"] == "completed", cluster.logs()
    assert fiber["result"] == {"n": COUNT, "total": COUNT * (COUNT + 1) // 2}
    assert fiber["attempts"] == 2
    numbers = counted(record)
    before = [n for attempt, n in numbers if attempt == 1]
    after = [n for attempt, n in numbers if attempt == 2]
    resumed_from = after[0] - 1
    assert before == list(range(1, len(before) + 1))
    assert after == list(range(resumed_from + 1, COUNT + 1))
    assert resumed_from % STASH_EVERY == 0
    assert 300 <= resumed_from <= before[-1] < resumed_from + STASH_EVERY  # lost < one stash
    recovered = [json.loads(line) for line in hooks.read_text().splitlines()]
    assert recovered == [
        {
            "fiber": fiber_id,
            "attempt": 2,
            "snapshot": {"n": resumed_from, "total": resumed_from * (resumed_from + 1) // 2},
        }
    ]
    assert [e["type"] for e in events] == ["fiber.started", "fiber.recovered", "fiber.completed"]
    assert events[1]["data"] == {"attempt": 2, "hasSnapshot": True}


@pytest.mark.store_agnostic
async def test_a_fiber_older_than_its_maximum_age_is_not_recovered_and_ends_in_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    record = tmp_path / "counted.txt"
    async with cluster.temporal():
        first = cluster.worker()
        await cluster.wait_polling(first)
        url = await cluster.gateway()
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            payload = {"to": COUNT, "delay_ms": 10, "record": str(record)}
            started = await http.post(
                "/v1/fibers",
                json={"agent": "fibers", "name": "count-briefly", "payload": payload},
            )
            fiber_id = started.json()["fiberId"]
            await until(http, fiber_id, lambda s: s["snapshot"] is not None)
            first.kill()
            cluster.worker()
            fiber = await until(http, fiber_id, lambda s: s["status"] != "running")
            events = (await http.get(f"/v1/fibers/{fiber_id}/events")).json()

    assert fiber["status"] == "error", cluster.logs()
    assert "older than its maximum age of 1 s" in fiber["error"]
    assert {attempt for attempt, _ in counted(record)} == {1}
    assert [e["type"] for e in events] == ["fiber.started", "fiber.failed"]
    assert events[1]["data"]["reason"] == "max_age_exceeded"
