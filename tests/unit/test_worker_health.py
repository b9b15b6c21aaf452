"""A worker's `/healthz` (docs/operations.md): served on the metrics thread, answered from checks
run on the worker's own event loop, within its bound whatever that loop does."""

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest

from perdure.runtime import worker_health
from perdure.runtime.worker_health import WorkerHealth
from perdure.telemetry.metrics_server import MetricsServer, serve_metrics


@contextmanager
def served(health: WorkerHealth, token: str | None = None) -> Iterator[MetricsServer]:
    server = serve_metrics("127.0.0.1", 0, health=health.answer, token=token)
    try:
        yield server
    finally:
        server.close()


async def probe(server: MetricsServer) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(f"http://127.0.0.1:{server.port}/healthz")


def checks_reporting(**checks: str) -> worker_health.Checks:
    async def run() -> dict[str, str]:
        return dict(checks)

    return run


@asynccontextmanager
async def polling_worker(health: WorkerHealth, checks: worker_health.Checks) -> AsyncIterator[None]:
    health.polling(checks)
    try:
        yield
    finally:
        health.stopping()


async def test_a_worker_that_has_not_started_polling_is_not_healthy_yet() -> None:
    with served(WorkerHealth()) as server:
        answer = await probe(server)

    assert answer.status_code == 503
    assert answer.json() == {"status": "unavailable", "checks": {"worker": "starting"}}


async def test_a_polling_worker_whose_store_and_temporal_answer_is_healthy() -> None:
    health = WorkerHealth()
    with served(health) as server:
        async with polling_worker(health, checks_reporting(store="ok", temporal="ok")):
            answer = await probe(server)

    assert answer.status_code == 200
    assert answer.json() == {
        "status": "ok",
        "checks": {"worker": "ok", "store": "ok", "temporal": "ok"},
    }


async def test_a_dependency_that_does_not_answer_is_named_in_a_503() -> None:
    health = WorkerHealth()
    unreachable = "unreachable: no answer within 2 s"
    with served(health) as server:
        async with polling_worker(health, checks_reporting(store="ok", temporal=unreachable)):
            answer = await probe(server)

    assert answer.status_code == 503
    assert answer.json()["checks"]["temporal"] == unreachable


async def test_a_worker_that_is_shutting_down_says_so() -> None:
    health = WorkerHealth()
    with served(health) as server:
        async with polling_worker(health, checks_reporting(store="ok", temporal="ok")):
            pass
        answer = await probe(server)

    assert answer.status_code == 503
    assert answer.json()["checks"] == {"worker": "shutting down"}


def test_a_blocked_event_loop_is_reported_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_health, "LOOP_SECONDS", 0.2)
    monkeypatch.setattr(worker_health, "CHECK_SECONDS", 0.2)
    health = WorkerHealth()
    loop = asyncio.new_event_loop()
    blocked, release = threading.Event(), threading.Event()

    async def poll_then_block() -> None:
        health.polling(checks_reporting(store="ok", temporal="ok"))
        blocked.set()
        release.wait(timeout=30)  # what a CPU-bound callback does to every activity
        await asyncio.sleep(0.1)  # the late probe's checks start, and end cancelled

    thread = threading.Thread(target=loop.run_until_complete, args=(poll_then_block(),))
    thread.start()
    try:
        assert blocked.wait(timeout=10)
        with served(health) as server:
            # A read timeout here is the bound not kept: the loop stays blocked for 30 s.
            answer = httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=10)
    finally:
        release.set()
        thread.join(timeout=10)
        loop.close()

    assert answer.status_code == 503
    assert answer.json()["checks"]["worker"].startswith("unresponsive: its event loop")


async def test_health_needs_no_metrics_token() -> None:
    health = WorkerHealth()
    with served(health, token="scrape-token") as server:
        async with polling_worker(health, checks_reporting(store="ok", temporal="ok")):
            answer = await probe(server)

    assert answer.status_code == 200
