"""Durable fibers end to end over HTTP: gateway → store → FiberWorkflow → the agent's fiber
(tests/fiber_agents.py), on the real Temporal server, SQLite and PostgreSQL."""

import asyncio
import dataclasses
import uuid
from datetime import datetime
from typing import Any

import httpx

from gateway.app import create_app
from perdure.domain.turn_priority import BACKGROUND_PRIORITY
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import send
from perdure.testing.stack import Stack
from tests.fiber_agents import completed_fibers

AGENT = "fibers"
ENDED = ("completed", "cancelled", "error")


def key() -> str:
    return f"key-{uuid.uuid4().hex[:12]}"


async def start(
    http: httpx.AsyncClient, name: str, payload: Any = None, **extra: Any
) -> httpx.Response:
    body = {"agent": AGENT, "name": name, "payload": payload, **extra}
    return await http.post("/v1/fibers", json=body)


async def ended(http: httpx.AsyncClient, fiber_id: str, timeout: float = 60) -> dict[str, Any]:
    """The fiber once it has ended (polled; bounded)."""
    async with asyncio.timeout(timeout):
        while True:
            fiber = (await http.get(f"/v1/fibers/{fiber_id}")).json()
            if fiber["status"] in ENDED:
                return fiber
            await asyncio.sleep(0.05)


async def until_snapshot(http: httpx.AsyncClient, fiber_id: str, expected: Any) -> None:
    async with asyncio.timeout(30):
        while (await http.get(f"/v1/fibers/{fiber_id}")).json()["snapshot"] != expected:
            await asyncio.sleep(0.05)


async def event_types(http: httpx.AsyncClient, fiber_id: str) -> list[str]:
    return [e["type"] for e in (await http.get(f"/v1/fibers/{fiber_id}/events")).json()]


async def test_a_started_fiber_is_accepted_and_runs_to_its_result(
    http: httpx.AsyncClient,
) -> None:
    response = await start(http, "count", {"to": 250})

    assert response.status_code == 202
    started = response.json()
    assert started["accepted"] is True
    assert started["status"] in ("pending", "running")
    fiber = await ended(http, started["fiberId"])
    assert fiber["status"] == "completed"
    assert fiber["result"] == {"n": 250, "total": 250 * 251 // 2}
    assert fiber["snapshot"] == {"n": 200, "total": 200 * 201 // 2}
    assert fiber["attempts"] == 1
    assert fiber["workflowId"] == f"fiber-{started['fiberId']}"


async def test_waiting_for_a_fiber_answers_with_its_result(http: httpx.AsyncClient) -> None:
    response = await start(http, "count", {"to": 10}, wait=True)

    assert response.status_code == 200
    assert response.json()["status"] == "completed"
    assert response.json()["result"] == {"n": 10, "total": 55}


async def test_the_same_idempotency_key_returns_the_same_fiber_without_accepting_it(
    http: httpx.AsyncClient,
) -> None:
    same = key()
    first = (await start(http, "count", {"to": 5}, idempotencyKey=same, wait=True)).json()

    again = await start(http, "count", {"to": 99}, idempotencyKey=same)

    assert again.status_code == 200
    assert again.json()["fiberId"] == first["fiberId"]
    assert again.json()["accepted"] is False
    assert again.json()["result"] == {"n": 5, "total": 15}


async def test_a_fiber_is_found_by_its_idempotency_key(http: httpx.AsyncClient) -> None:
    mine = f"report/{key()}"
    started = (await start(http, "count", {"to": 3}, idempotencyKey=mine)).json()

    found = await http.get(f"/v1/fibers/by-key/{mine}")

    assert found.status_code == 200
    assert found.json()["fiberId"] == started["fiberId"]
    assert found.json()["idempotencyKey"] == mine
    assert (await http.get(f"/v1/fibers/by-key/{key()}")).status_code == 404


async def test_fibers_are_listed_newest_first_and_filtered_by_status(
    http: httpx.AsyncClient,
) -> None:
    done = (await start(http, "count", {"to": 2}, wait=True)).json()
    failed = (await start(http, "fail", {"message": "listed"}, wait=True)).json()

    everything = (await http.get("/v1/fibers", params={"limit": 200})).json()
    errors = (await http.get("/v1/fibers", params={"status": "error", "limit": 200})).json()

    ids = [f["fiberId"] for f in everything["data"]]
    assert ids.index(failed["fiberId"]) < ids.index(done["fiberId"])
    assert everything["count"] >= 2
    assert {f["status"] for f in errors["data"]} == {"error"}
    assert failed["fiberId"] in [f["fiberId"] for f in errors["data"]]
    assert done["fiberId"] not in [f["fiberId"] for f in errors["data"]]


async def test_a_cancel_reaches_the_running_fiber_which_ends_cancelled_keeping_its_snapshot(
    http: httpx.AsyncClient,
) -> None:
    fiber_id = (await start(http, "wait_for_cancel")).json()["fiberId"]
    await until_snapshot(http, fiber_id, {"waiting": True})

    cancel = await http.post(f"/v1/fibers/{fiber_id}/cancel")

    assert cancel.status_code == 202
    fiber = await ended(http, fiber_id)
    assert fiber["status"] == "cancelled"
    assert fiber["snapshot"] == {"waiting": False, "noticed": True}
    assert await event_types(http, fiber_id) == ["fiber.started", "fiber.cancelled"]


async def test_cancelling_a_cancelled_fiber_again_changes_nothing(
    http: httpx.AsyncClient,
) -> None:
    fiber_id = (await start(http, "wait_for_cancel")).json()["fiberId"]
    await until_snapshot(http, fiber_id, {"waiting": True})
    await http.post(f"/v1/fibers/{fiber_id}/cancel")
    await ended(http, fiber_id)

    again = await http.post(f"/v1/fibers/{fiber_id}/cancel")

    assert again.status_code == 200
    assert again.json()["status"] == "cancelled"


async def test_cancelling_a_completed_fiber_is_a_conflict(http: httpx.AsyncClient) -> None:
    fiber_id = (await start(http, "count", {"to": 1}, wait=True)).json()["fiberId"]

    response = await http.post(f"/v1/fibers/{fiber_id}/cancel")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "fiber_ended"


async def test_an_ended_fiber_is_deleted_with_its_events(http: httpx.AsyncClient) -> None:
    fiber_id = (await start(http, "count", {"to": 1}, wait=True)).json()["fiberId"]

    deleted = await http.delete(f"/v1/fibers/{fiber_id}")

    assert deleted.status_code == 204
    assert (await http.get(f"/v1/fibers/{fiber_id}")).status_code == 404
    assert (await http.get(f"/v1/fibers/{fiber_id}/events")).status_code == 404


async def test_a_running_fiber_cannot_be_deleted(http: httpx.AsyncClient) -> None:
    fiber_id = (await start(http, "wait_for_cancel")).json()["fiberId"]
    await until_snapshot(http, fiber_id, {"waiting": True})

    response = await http.delete(f"/v1/fibers/{fiber_id}")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "fiber_running"
    await http.post(f"/v1/fibers/{fiber_id}/cancel")
    await ended(http, fiber_id)


async def test_fibers_that_ended_before_a_time_are_deleted_and_the_rest_kept(
    http: httpx.AsyncClient,
) -> None:
    old = (await start(http, "count", {"to": 1}, wait=True)).json()["fiberId"]
    newer = (await start(http, "count", {"to": 1}, wait=True)).json()["fiberId"]
    # The store's own times: the old fiber ended before the newer one was created.
    cutoff = datetime.fromisoformat((await http.get(f"/v1/fibers/{newer}")).json()["createdAt"])

    response = await http.delete("/v1/fibers", params={"completedBefore": cutoff.isoformat()})

    assert response.status_code == 200
    assert response.json()["deleted"] >= 1
    assert (await http.get(f"/v1/fibers/{old}")).status_code == 404
    assert (await http.get(f"/v1/fibers/{newer}")).status_code == 200


async def test_a_fiber_no_agent_declares_is_refused_naming_the_known_ones(
    http: httpx.AsyncClient,
) -> None:
    response = await start(http, "no-such-fiber")

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_fiber"
    assert "fibers.count" in response.json()["error"]["message"]


async def test_an_agent_nobody_serves_is_refused_naming_the_known_fibers(
    http: httpx.AsyncClient,
) -> None:
    response = await http.post("/v1/fibers", json={"agent": "nobody", "name": "count"})

    assert response.status_code == 422
    assert "unknown agent 'nobody'" in response.json()["error"]["message"]
    assert "fibers.count" in response.json()["error"]["message"]


async def test_without_an_agent_the_one_agent_declaring_the_fiber_runs_it(
    http: httpx.AsyncClient,
) -> None:
    response = await http.post(
        "/v1/fibers", json={"name": "count", "payload": {"to": 4}, "wait": True}
    )

    assert response.status_code == 200
    fiber = (await http.get(f"/v1/fibers/{response.json()['fiberId']}")).json()
    assert fiber["agent"] == AGENT


async def test_a_payload_the_fiber_does_not_accept_ends_it_in_error_saying_why(
    http: httpx.AsyncClient,
) -> None:
    response = await start(http, "count", {"to": "many"}, wait=True)

    assert response.json()["status"] == "error"
    assert "invalid payload for fiber 'count'" in response.json()["error"]
    assert "to:" in response.json()["error"]


async def test_a_fiber_that_raises_ends_in_error_with_a_failed_event(
    http: httpx.AsyncClient,
) -> None:
    response = await start(http, "fail", {"message": "disk full"}, wait=True)

    fiber_id = response.json()["fiberId"]
    assert response.status_code == 200
    assert response.json()["status"] == "error"
    assert response.json()["error"] == "RuntimeError: disk full"
    events = (await http.get(f"/v1/fibers/{fiber_id}/events")).json()
    assert [e["type"] for e in events] == ["fiber.started", "fiber.failed"]
    assert events[1]["data"]["reason"] == "raised"


async def test_a_completed_fiber_records_its_started_and_completed_events(
    http: httpx.AsyncClient,
) -> None:
    fiber_id = (await start(http, "count", {"to": 1}, wait=True)).json()["fiberId"]

    assert await event_types(http, fiber_id) == ["fiber.started", "fiber.completed"]


async def test_on_fiber_complete_is_called_with_the_fiber_and_its_result(
    http: httpx.AsyncClient,
) -> None:
    started = await start(
        http, "count", {"to": 3}, wait=True, metadata={"owner": "ops"}, idempotencyKey=key()
    )

    fiber_id = started.json()["fiberId"]
    calls = [(ctx, result) for ctx, result in completed_fibers if ctx.fiber_id == fiber_id]
    assert len(calls) == 1
    ctx, result = calls[0]
    assert result == {"n": 3, "total": 6}
    assert (ctx.name, ctx.agent, ctx.tenant_id) == ("count", AGENT, "default")
    assert ctx.metadata == {"owner": "ops"}
    assert ctx.snapshot is None
    assert ctx.recovered is False


async def test_a_tool_starts_a_fiber_for_the_tenant_of_its_turn(
    http: httpx.AsyncClient,
) -> None:
    session = f"fiber-tool-{uuid.uuid4().hex[:8]}"

    streamed = await send(http, session, '@tool start_counting {"to": 7}', agent=AGENT)

    outputs = [c for c in streamed.chunks if c["type"] == "tool-output-available"]
    assert len(outputs) == 1
    fiber = await ended(http, outputs[0]["output"])
    assert fiber["status"] == "completed"
    assert fiber["result"] == {"n": 7, "total": 28}
    assert fiber["metadata"] == {"from": "tool"}


async def test_a_fiber_runs_another_fiber_and_gets_its_result(http: httpx.AsyncClient) -> None:
    response = await start(http, "count_in_a_child", {"to": 20}, wait=True)

    assert response.json()["status"] == "completed"
    result = response.json()["result"]
    assert result["status"] == "completed"
    assert result["result"] == {"n": 20, "total": 210}
    child = (await http.get(f"/v1/fibers/{result['child']}")).json()
    assert child["idempotencyKey"] == f"child-of-{response.json()['fiberId']}"


async def test_invalid_start_requests_are_refused_with_the_field_named(
    http: httpx.AsyncClient,
) -> None:
    unknown_field = await http.post("/v1/fibers", json={"name": "count", "colour": "red"})
    bad_name = await http.post("/v1/fibers", json={"name": "a b"})
    bad_key = await http.post("/v1/fibers", json={"name": "count", "idempotencyKey": ""})
    long_wait = await http.post("/v1/fibers", json={"name": "count", "waitSeconds": 3600})
    too_big = await http.post(
        "/v1/fibers", json={"name": "count", "payload": {"blob": "x" * 1_100_000}}
    )

    assert [r.status_code for r in (unknown_field, bad_name, bad_key, long_wait)] == [422] * 4
    assert unknown_field.json()["error"]["problems"][0]["field"] == "colour"
    assert long_wait.json()["error"]["problems"][0]["field"] == "waitSeconds"
    assert too_big.status_code == 413


async def test_a_malformed_fiber_id_is_refused_and_an_unknown_one_is_not_found(
    http: httpx.AsyncClient,
) -> None:
    assert (await http.get("/v1/fibers/not-an-id")).status_code == 422
    assert (await http.get(f"/v1/fibers/{uuid.uuid4().hex}")).status_code == 404
    assert (await http.post(f"/v1/fibers/{uuid.uuid4().hex}/cancel")).status_code == 404


async def test_a_tenant_never_sees_or_changes_another_tenants_fiber(stack: Stack) -> None:
    settings = stack.settings.model_copy(
        update={"api_keys": ApiKeys.parse("key-a:alpha,key-b:beta")}
    )
    app = create_app(services=dataclasses.replace(stack.services, settings=settings))
    alpha = {"Authorization": "Bearer key-a"}
    beta = {"Authorization": "Bearer key-b"}
    shared_key = key()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://perdure") as api:
        body = {"name": "count", "payload": {"to": 2}, "idempotencyKey": shared_key}
        mine = (await api.post("/v1/fibers", json={**body, "wait": True}, headers=alpha)).json()
        fiber_id = mine["fiberId"]

        assert (await api.get(f"/v1/fibers/{fiber_id}", headers=beta)).status_code == 404
        assert (await api.get(f"/v1/fibers/{fiber_id}/events", headers=beta)).status_code == 404
        assert (await api.post(f"/v1/fibers/{fiber_id}/cancel", headers=beta)).status_code == 404
        assert (await api.delete(f"/v1/fibers/{fiber_id}", headers=beta)).status_code == 404
        by_key = await api.get(f"/v1/fibers/by-key/{shared_key}", headers=beta)
        assert by_key.status_code == 404
        listed = (await api.get("/v1/fibers", headers=beta)).json()
        assert fiber_id not in [f["fiberId"] for f in listed["data"]]
        theirs = (await api.post("/v1/fibers", json=body, headers=beta)).json()
        assert theirs["accepted"] is True
        assert theirs["fiberId"] != fiber_id
        assert (await api.get(f"/v1/fibers/{fiber_id}", headers=alpha)).status_code == 200


async def test_a_fiber_whose_every_attempt_overruns_ends_in_error_after_its_max_attempts(
    http: httpx.AsyncClient,
) -> None:
    """Each attempt is cut off at `max_run_time` and recovered, up to `max_attempts` (2)."""
    fiber_id = (await start(http, "overrun")).json()["fiberId"]

    fiber = await ended(http, fiber_id)

    assert fiber["status"] == "error"
    assert fiber["attempts"] == 2
    assert fiber["error"].startswith("gave up after its last allowed attempt")
    assert fiber["snapshot"] == {"attempt": 2}
    types = await event_types(http, fiber_id)
    assert types == ["fiber.started", "fiber.recovered", "fiber.failed"]


async def test_concurrent_fibers_each_stash_only_their_own_snapshot(
    http: httpx.AsyncClient,
) -> None:
    """`perdure.stash()` finds its fiber by context: fibers running side by side in one
    worker never write each other's snapshot."""
    ids = [(await start(http, "stash-own-id", {"rounds": 20})).json()["fiberId"] for _ in range(4)]

    fibers = await asyncio.gather(*(ended(http, fiber_id) for fiber_id in ids))

    for fiber_id, fiber in zip(ids, fibers, strict=True):
        assert fiber["status"] == "completed", fiber
        assert {seen["fiber"] for seen in fiber["result"]} == {fiber_id}
        assert fiber["snapshot"] == {"fiber": fiber_id, "n": 19}


async def test_a_fiber_runs_behind_interactive_turns_in_its_tenants_share(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    started = (await start(http, "count", {"to": 3})).json()
    fiber = await ended(http, started["fiberId"])

    handle = stack.services.client.get_workflow_handle(fiber["workflowId"])
    priority = (await handle.describe()).raw_description.workflow_execution_info.priority

    assert priority.priority_key == BACKGROUND_PRIORITY
    assert priority.fairness_key == "default"
