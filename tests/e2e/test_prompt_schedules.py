"""Scheduled prompts over HTTP, on the real Temporal server, SQLite and PostgreSQL: each
occurrence is one durable submission keyed by the schedule and its time, realised as a Temporal
Schedule; missed occurrences run only when a backfill asks for them."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowFailureError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from perdure.agents_registry import AgentRegistry, load_agents
from perdure.domain.names import SCHEDULED_PROMPT_WORKFLOW, prompt_schedule_id, turn_workflow_id
from perdure.domain.prompt_schedules import FireScheduleInput, FireScheduleResult
from perdure.domain.turn_priority import BACKGROUND_PRIORITY, INTERACTIVE_PRIORITY
from perdure.runtime.prompt_schedules import declared_rows, sync_declared_schedules
from perdure.testing.chat_client import send
from perdure.testing.stack import Stack, running_stack
from perdure.turn_control.prompt_schedules import CATCHUP_WINDOW
from storage.prompt_schedules import PromptScheduleConflict
from storage.tenant_policies import set_policy
from tests.databases import database_url
from tests.prompt_schedule_agents import DECLARED, Scheduler
from workflows.prompt_schedules import ScheduledPromptWorkflow

WAIT_SECONDS = 30.0
"""The bound of every wait for something to happen (a turn answered, a workflow done)."""
DAILY = 24 * 3600


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def stack(
    request: pytest.FixtureRequest,
    temporal_env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    """A stack serving the schedule agents (offline `demo` model), one per store."""
    directory = tmp_path_factory.mktemp(f"schedules-{request.param}")
    with database_url(request.param, directory) as url:
        async with running_stack(
            client=temporal_env.client,
            database_url=url,
            data_dir=directory,
            agents="tests.prompt_schedule_agents",
        ) as running:
            yield running


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


def _ids() -> tuple[str, str]:
    """A fresh schedule id and session id."""
    tag = uuid.uuid4().hex[:8]
    return f"sch-{tag}", f"scheduled-{tag}"


async def _create(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await http.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def _until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """`check()`'s first truthy result, polled for at most WAIT_SECONDS."""
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not (result := await check()):
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"no {what} within {WAIT_SECONDS:g} s") from None
    return result


async def _answered(http: httpx.AsyncClient, session: str, turns: int) -> list[dict[str, Any]]:
    """The session's messages once `turns` scheduled prompts have been answered."""

    async def done() -> list[dict[str, Any]] | None:
        response = await http.get(f"/api/chat/{session}/messages")
        if response.status_code != 200:
            return None
        messages: list[dict[str, Any]] = response.json()
        finished = [
            m
            for m in messages
            if m["role"] == "assistant" and (m.get("metadata") or {}).get("status") != "streaming"
        ]
        return messages if len(finished) >= turns else None

    answered: list[dict[str, Any]] = await _until(done, f"{turns} answers in {session}")
    return answered


async def _runs(client: Client, stack: Stack, schedule_id: str, count: int) -> list[Any]:
    """The first `count` occurrence workflows Temporal started for the schedule, each awaited
    to its end (its result, or the exception it failed with)."""
    handle = client.get_schedule_handle(
        prompt_schedule_id(stack.settings.task_queue, "default", schedule_id)
    )

    async def started() -> list[ScheduleActionExecutionStartWorkflow] | None:
        actions = [
            result.action
            for result in (await handle.describe()).info.recent_actions
            if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
        ]
        return actions if len(actions) >= count else None

    actions = await _until(started, f"{count} runs of {schedule_id}")
    outcomes = []
    for action in actions[:count]:
        run = client.get_workflow_handle_for(
            ScheduledPromptWorkflow.run, action.workflow_id, run_id=action.first_execution_run_id
        )
        try:
            async with asyncio.timeout(WAIT_SECONDS):
                outcomes.append(await run.result())
        except WorkflowFailureError as failure:
            outcomes.append(failure)
    return outcomes


async def _events(http: httpx.AsyncClient, session: str, kind: str) -> list[dict[str, Any]]:
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    return [event for event in events if event["type"] == kind]


def _new_years_midnight_in_paris(moment: str) -> bool:
    local = datetime.fromisoformat(moment).astimezone(ZoneInfo("Europe/Paris"))
    return (local.month, local.day, local.hour, local.minute) == (1, 1, 0, 0)


def _midnights_before(moment: datetime, days: int) -> list[datetime]:
    last = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return [last - timedelta(days=back) for back in reversed(range(days))]


# --- creating, reading, listing ---------------------------------------------------------------


async def test_a_schedule_created_over_http_is_a_temporal_schedule_starting_the_prompt_workflow(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()

    created = await _create(
        http, id=schedule, sessionId=session, prompt="Status?", everySeconds=3600
    )

    description = await stack.services.client.get_schedule_handle(
        created["temporalScheduleId"]
    ).describe()
    action = description.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert action.workflow == SCHEDULED_PROMPT_WORKFLOW
    assert action.task_queue == stack.settings.task_queue
    assert description.schedule.spec.intervals[0].every == timedelta(hours=1)
    assert (created["source"], created["paused"], created["agent"]) == ("api", False, "default")


async def test_reading_a_schedule_shows_its_next_runs_from_temporal(
    http: httpx.AsyncClient,
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Status?", everySeconds=3600)

    read = (await http.get(f"/v1/schedules/{schedule}")).json()

    runs = [datetime.fromisoformat(t) for t in read["nextRunTimes"]]
    assert len(runs) >= 2
    assert all(run.minute == run.second == 0 for run in runs)  # every hour, on the hour
    assert runs[1] - runs[0] == timedelta(hours=1)
    assert read["recentRuns"] == []


async def test_a_cron_schedule_fires_at_its_times_in_its_time_zone(
    http: httpx.AsyncClient,
) -> None:
    schedule, session = _ids()
    await _create(
        http,
        id=schedule,
        sessionId=session,
        prompt="Standup notes?",
        cron="30 9 * * mon-fri",
        timezone="Asia/Tokyo",
    )

    read = (await http.get(f"/v1/schedules/{schedule}")).json()

    runs = [datetime.fromisoformat(t) for t in read["nextRunTimes"]]
    assert runs and all((run.hour, run.minute) == (0, 30) for run in runs)  # 09:30 JST
    assert all(run.weekday() < 5 for run in runs)
    assert (read["cron"], read["timezone"]) == ("30 9 * * mon-fri", "Asia/Tokyo")


async def test_a_schedule_without_an_id_gets_one(http: httpx.AsyncClient) -> None:
    _, session = _ids()

    created = await _create(http, sessionId=session, prompt="Hi", cron="@daily")

    assert created["id"].startswith("sch-")
    assert (await http.get(f"/v1/schedules/{created['id']}")).status_code == 200


async def test_a_tenants_schedules_are_listed_by_id(http: httpx.AsyncClient) -> None:
    first, session = _ids()
    await _create(http, id=f"{first}-a", sessionId=session, prompt="A", cron="@daily")
    await _create(http, id=f"{first}-b", sessionId=session, prompt="B", cron="@daily")

    listed = (await http.get("/v1/schedules", params={"limit": 200})).json()

    ids = [s["id"] for s in listed["data"]]
    assert ids == sorted(ids)
    assert {f"{first}-a", f"{first}-b"} <= set(ids)
    assert listed["count"] == len(ids)


async def test_a_second_schedule_with_the_same_id_is_a_409(http: httpx.AsyncClient) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="A", cron="@daily")

    again = await http.post(
        "/v1/schedules",
        json={"id": schedule, "sessionId": session, "prompt": "B", "cron": "@daily"},
    )

    assert again.status_code == 409
    assert again.json()["error"]["code"] == "schedule_exists"
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["prompt"] == "A"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"cron": "0 9 * * *", "everySeconds": 3600}, "exactly one of"),
        ({}, "exactly one of"),
        ({"cron": "61 * * * *"}, "minute: '61' is not within 0-59"),
        ({"cron": "0 9 * *"}, "5 fields"),
        ({"everySeconds": 5}, "greater than or equal to 60"),
        ({"cron": "@daily", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"everySeconds": 3600, "timezone": "UTC"}, "applies to `cron` only"),
        ({"cron": "@daily", "prompt": "   "}, "prompt"),
        ({"cron": "@daily", "id": "has:colon"}, "id"),
        ({"cron": "@daily", "frequency": "often"}, "frequency"),
    ],
    ids=[
        "cron-and-interval",
        "neither",
        "out-of-range",
        "four-fields",
        "interval-under-a-minute",
        "unknown-time-zone",
        "time-zone-with-interval",
        "blank-prompt",
        "id-with-colon",
        "unknown-field",
    ],
)
async def test_an_invalid_schedule_is_refused_naming_the_problem(
    http: httpx.AsyncClient, change: dict[str, Any], problem: str
) -> None:
    _, session = _ids()

    response = await http.post(
        "/v1/schedules", json={"sessionId": session, "prompt": "Hi", **change}
    )

    assert response.status_code == 422, response.text
    assert problem in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron": "0 9 * * *", "everySeconds": 3600}, "everySeconds"),
        ({}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "@daily", "timezone": "Mars/Olympus"}, "timezone"),
        ({"everySeconds": 3600, "timezone": "UTC"}, "timezone"),
    ],
    ids=[
        "cron-and-interval",
        "neither",
        "bad-cron",
        "unknown-time-zone",
        "time-zone-with-interval",
    ],
)
async def test_an_invalid_recurrence_is_refused_naming_its_field(
    http: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    _, session = _ids()

    response = await http.post(
        "/v1/schedules", json={"sessionId": session, "prompt": "Hi", **change}
    )

    assert response.status_code == 422, response.text
    (problem,) = response.json()["error"]["problems"]
    assert problem["field"] == field
    assert not problem["message"].startswith("Value error")


async def test_an_invalid_change_names_its_field(http: httpx.AsyncClient) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY)

    response = await http.patch(f"/v1/schedules/{schedule}", json={"timezone": "Europe/Paris"})

    assert response.status_code == 422, response.text
    assert response.json()["error"]["problems"] == [
        {
            "field": "timezone",
            "message": "`timezone` applies to `cron` only; an interval ignores it",
        }
    ]


async def test_an_agent_no_worker_serves_is_refused(http: httpx.AsyncClient) -> None:
    _, session = _ids()

    response = await http.post(
        "/v1/schedules",
        json={"sessionId": session, "prompt": "Hi", "cron": "@daily", "agent": "nobody"},
    )

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_agent"
    assert "helper, interrupter, refuser, scheduler" in response.json()["error"]["message"]


async def test_an_oversized_body_is_refused(http: httpx.AsyncClient) -> None:
    _, session = _ids()

    response = await http.post(
        "/v1/schedules", json={"sessionId": session, "prompt": "x" * 200_000, "cron": "@daily"}
    )

    assert response.status_code == 413


# --- changing ---------------------------------------------------------------------------------


async def _change(http: httpx.AsyncClient, schedule: str, **change: Any) -> dict[str, Any]:
    response = await http.patch(f"/v1/schedules/{schedule}", json=change)
    assert response.status_code == 200, response.text
    changed: dict[str, Any] = response.json()
    return changed


async def test_a_changed_schedule_sends_its_new_prompt_to_its_new_session_with_its_new_agent(
    http: httpx.AsyncClient,
) -> None:
    schedule, session = _ids()
    _, elsewhere = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY)

    changed = await _change(
        http, schedule, prompt="What is 6*7?", sessionId=elsewhere, agent="helper"
    )
    await http.post(f"/v1/schedules/{schedule}/trigger")
    messages = await _answered(http, elsewhere, turns=1)

    assert (changed["prompt"], changed["sessionId"], changed["agent"]) == (
        "What is 6*7?",
        elsewhere,
        "helper",
    )
    assert changed["everySeconds"] == DAILY
    assert messages[0]["parts"] == [{"type": "text", "text": "What is 6*7?"}]
    assert (await http.get(f"/v1/sessions/{elsewhere}")).json()["agent"] == "helper"
    assert (await http.get(f"/api/chat/{session}/messages")).status_code == 404


async def test_a_new_recurrence_replaces_the_temporal_schedules_and_keeps_it_paused(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(
        http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly", paused=True
    )

    changed = await _change(http, schedule, everySeconds=7200)

    description = await stack.services.client.get_schedule_handle(
        created["temporalScheduleId"]
    ).describe()
    assert (changed["cron"], changed["everySeconds"], changed["paused"]) == (None, 7200, True)
    assert description.schedule.spec.intervals[0].every == timedelta(hours=2)
    assert description.schedule.spec.calendars == []
    assert description.schedule.state.paused is True
    assert changed["updatedAt"] > created["updatedAt"]


async def test_a_time_zone_alone_moves_a_cron_schedule_to_that_zone(
    http: httpx.AsyncClient,
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="30 9 * * *")

    changed = await _change(http, schedule, timezone="Asia/Tokyo")
    read = (await http.get(f"/v1/schedules/{schedule}")).json()

    assert (changed["cron"], changed["timezone"]) == ("30 9 * * *", "Asia/Tokyo")
    runs = [datetime.fromisoformat(t) for t in read["nextRunTimes"]]
    assert runs and all((run.hour, run.minute) == (0, 30) for run in runs)  # 09:30 JST


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({}, "give at least one of"),
        ({"paused": True}, "/pause"),
        ({"prompt": None}, "`prompt` may not be null"),
        ({"prompt": "   "}, "prompt"),
        ({"cron": "61 * * * *"}, "minute: '61' is not within 0-59"),
        ({"cron": "@daily", "everySeconds": 3600}, "exactly one of"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"timezone": "UTC"}, "applies to `cron` only"),
        ({"sessionId": "has space"}, "sessionId"),
        ({"frequency": "often"}, "frequency"),
    ],
    ids=[
        "nothing",
        "paused",
        "null-prompt",
        "blank-prompt",
        "out-of-range",
        "cron-and-interval",
        "unknown-time-zone",
        "time-zone-of-an-interval",
        "bad-session-id",
        "unknown-field",
    ],
)
async def test_an_invalid_change_is_refused_naming_the_problem_and_changes_nothing(
    http: httpx.AsyncClient, change: dict[str, Any], problem: str
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    response = await http.patch(f"/v1/schedules/{schedule}", json=change)

    assert response.status_code == 422, response.text
    assert problem in response.json()["error"]["message"]
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["updatedAt"] == created["updatedAt"]


async def test_a_change_to_an_agent_no_worker_serves_is_refused(http: httpx.AsyncClient) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@daily")

    response = await http.patch(f"/v1/schedules/{schedule}", json={"agent": "nobody"})

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_agent"
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["agent"] == "default"


async def test_a_change_to_an_agent_the_tenant_may_not_use_is_forbidden(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@daily")
    await set_policy(stack.services.db, "default", allowed_agents=["default"])
    try:
        response = await http.patch(f"/v1/schedules/{schedule}", json={"agent": "helper"})
        prompt_only = await http.patch(f"/v1/schedules/{schedule}", json={"prompt": "Hello"})
    finally:
        await set_policy(stack.services.db, "default", allowed_agents=None)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "agent_not_allowed"
    assert prompt_only.status_code == 200
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["agent"] == "default"


async def test_a_change_recreates_a_temporal_schedule_deleted_by_hand(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")
    handle = stack.services.client.get_schedule_handle(created["temporalScheduleId"])
    await handle.delete()

    await _change(http, schedule, cron="@daily")

    described = await handle.describe()
    runs = described.info.next_action_times
    assert runs and all((run.hour, run.minute) == (0, 0) for run in runs)
    assert runs[1] - runs[0] == timedelta(days=1)


async def test_concurrent_changes_leave_temporal_with_the_stored_definition(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    responses = await asyncio.gather(
        *(
            http.patch(f"/v1/schedules/{schedule}", json={"everySeconds": 3600 * hours})
            for hours in range(2, 8)
        )
    )

    assert [r.status_code for r in responses] == [200] * 6
    stored = (await http.get(f"/v1/schedules/{schedule}")).json()["everySeconds"]
    description = await stack.services.client.get_schedule_handle(
        created["temporalScheduleId"]
    ).describe()
    assert description.schedule.spec.intervals[0].every == timedelta(seconds=stored)


async def test_a_declared_schedule_cannot_be_changed_over_http(http: httpx.AsyncClient) -> None:
    response = await http.patch(f"/v1/schedules/{DECLARED.id}", json={"prompt": "Changed"})

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "declared_schedule"
    assert (await http.get(f"/v1/schedules/{DECLARED.id}")).json()["prompt"] == DECLARED.prompt


# --- firing -----------------------------------------------------------------------------------


async def test_an_occurrence_sends_the_prompt_into_the_session_and_the_agent_answers(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(
        http,
        id=schedule,
        sessionId=session,
        prompt="What is 6*7?",
        everySeconds=3600,
        agent="helper",
    )

    triggered = await http.post(f"/v1/schedules/{schedule}/trigger")
    messages = await _answered(http, session, turns=1)

    user, answer = messages
    assert triggered.status_code == 202
    assert user["parts"] == [{"type": "text", "text": "What is 6*7?"}]
    assert user["metadata"]["source"] == "schedule"
    assert user["metadata"]["scheduleId"] == schedule
    assert "42" in "".join(p.get("text", "") for p in answer["parts"])
    session_read = (await http.get(f"/v1/sessions/{session}")).json()
    assert session_read["agent"] == "helper"


async def test_a_trigger_answers_the_schedule_as_it_stands(http: httpx.AsyncClient) -> None:
    schedule, session = _ids()
    created = await _create(
        http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY, paused=True
    )

    response = await http.post(f"/v1/schedules/{schedule}/trigger")

    assert response.status_code == 202
    assert response.json()["id"] == schedule
    assert response.json()["paused"] is True
    assert response.json()["sessionId"] == created["sessionId"]


async def test_a_paused_schedule_still_fires_when_triggered(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@daily", paused=True)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)

    assert result.created
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["paused"] is True


async def test_a_scheduled_prompts_turn_runs_behind_interactive_turns(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)

    turn = stack.services.client.get_workflow_handle(turn_workflow_id(result.submission_id))
    priority = (await turn.describe()).raw_description.workflow_execution_info.priority
    assert priority.priority_key == BACKGROUND_PRIORITY > INTERACTIVE_PRIORITY
    assert priority.fairness_key == "default"


async def test_an_occurrence_is_keyed_by_the_schedules_scheduled_time(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)

    read = (await http.get(f"/v1/schedules/{schedule}")).json()
    scheduled_at = datetime.fromisoformat(read["recentRuns"][0]["scheduledAt"])
    assert isinstance(result, FireScheduleResult) and result.created
    # Temporal's TemporalScheduledStartTime keeps whole seconds (as its workflow ids do).
    assert datetime.fromisoformat(read["lastOccurrence"]) == scheduled_at.replace(microsecond=0)
    assert read["lastSubmissionId"] == result.submission_id
    assert read["lastError"] is None


async def test_each_occurrence_is_recorded_as_a_schedule_fired_event(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)

    (fired,) = await _events(http, session, "schedule.fired")
    assert fired["submission_id"] == result.submission_id
    assert fired["data"]["scheduleId"] == schedule
    assert fired["data"]["created"] is True


async def test_an_occurrence_fired_twice_runs_once(http: httpx.AsyncClient, stack: Stack) -> None:
    """The same occurrence backfilled twice: Temporal starts its workflow twice, one turn runs."""
    schedule, session = _ids()
    await _create(
        http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY, paused=True
    )
    # Yesterday's midnight: the period ends in the past at any time of day (an end in the
    # future is refused, and today's midnight + 1 h is in the future until 01:00 UTC).
    midnight = _midnights_before(datetime.now(UTC), 2)[0]
    period = {
        "start": (midnight - timedelta(hours=1)).isoformat(),
        "end": (midnight + timedelta(hours=1)).isoformat(),
    }

    backfilled = await http.post(f"/v1/schedules/{schedule}/backfill", json=period)
    assert backfilled.status_code == 202, backfilled.text
    await _runs(stack.services.client, stack, schedule, 1)
    again = await http.post(f"/v1/schedules/{schedule}/backfill", json=period)
    assert again.status_code == 202, again.text
    first, second = await _runs(stack.services.client, stack, schedule, 2)

    assert (first.created, second.created) == (True, False)
    assert first.submission_id == second.submission_id
    messages = await _answered(http, session, turns=1)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    fired = await _events(http, session, "schedule.fired")
    assert [e["data"]["created"] for e in fired] == [True, False]


async def test_a_manual_start_of_a_fired_occurrence_returns_its_submission(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)
    await http.post(f"/v1/schedules/{schedule}/trigger")
    (fired,) = await _runs(stack.services.client, stack, schedule, 1)
    occurrence = datetime.fromisoformat(
        (await http.get(f"/v1/schedules/{schedule}")).json()["lastOccurrence"]
    )

    again = await stack.services.client.execute_workflow(
        ScheduledPromptWorkflow.run,
        FireScheduleInput(tenant_id="default", schedule_id=schedule, occurrence=occurrence),
        id=f"manual-{uuid.uuid4().hex[:8]}",
        task_queue=stack.settings.task_queue,
    )

    assert again.submission_id == fired.submission_id
    assert again.created is False


async def test_an_occurrence_of_a_deleted_schedule_submits_nothing(stack: Stack) -> None:
    schedule, _ = _ids()

    result = await stack.services.client.execute_workflow(
        ScheduledPromptWorkflow.run,
        FireScheduleInput(tenant_id="default", schedule_id=schedule, occurrence=datetime.now(UTC)),
        id=f"manual-{uuid.uuid4().hex[:8]}",
        task_queue=stack.settings.task_queue,
    )

    assert result == FireScheduleResult(outcome="gone")


async def test_an_occurrence_started_without_its_time_fails_clearly(stack: Stack) -> None:
    schedule, _ = _ids()

    with pytest.raises(WorkflowFailureError) as failure:
        await stack.services.client.execute_workflow(
            ScheduledPromptWorkflow.run,
            FireScheduleInput(tenant_id="default", schedule_id=schedule),
            id=f"manual-{uuid.uuid4().hex[:8]}",
            task_queue=stack.settings.task_queue,
        )

    assert "without an occurrence time" in str(failure.value.cause)


async def test_occurrences_queue_behind_a_running_turn_in_order(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(
        http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY, paused=True
    )
    days = _midnights_before(datetime.now(UTC), 3)
    period = {"start": (days[0] - timedelta(hours=1)).isoformat(), "end": days[-1].isoformat()}

    backfilled = await http.post(f"/v1/schedules/{schedule}/backfill", json=period)
    assert backfilled.status_code == 202, backfilled.text
    await _runs(stack.services.client, stack, schedule, 3)
    messages = await _answered(http, session, turns=3)

    users = [m for m in messages if m["role"] == "user"]
    assert [datetime.fromisoformat(m["metadata"]["occurrence"]) for m in users] == days
    assert [m["role"] for m in messages] == ["user", "assistant"] * 3


async def test_an_occurrence_refused_by_a_busy_session_is_recorded_as_the_last_error(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    parked = await send(http, session, "what is 12*7?", agent="refuser")
    assert parked.chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)

    read = (await http.get(f"/v1/schedules/{schedule}")).json()
    assert isinstance(result, FireScheduleResult) and result.outcome == "refused"
    assert "a turn is running in session" in read["lastError"]
    assert read["lastSubmissionId"] is None


async def test_an_occurrence_into_an_interrupting_session_stops_its_running_turn(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    parked = await send(http, session, "what is 12*7?", agent="interrupter")
    assert parked.chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    await _create(http, id=schedule, sessionId=session, prompt="Hello", everySeconds=DAILY)

    await http.post(f"/v1/schedules/{schedule}/trigger")
    (result,) = await _runs(stack.services.client, stack, schedule, 1)
    messages = await _answered(http, session, turns=2)

    assert isinstance(result, FireScheduleResult) and result.outcome == "submitted"
    statuses = [m["metadata"]["status"] for m in messages if m["role"] == "assistant"]
    assert statuses == ["aborted", "completed"]


async def test_an_occurrence_of_an_agent_its_tenant_may_no_longer_use_is_refused(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(
        http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY, agent="helper"
    )
    await set_policy(stack.services.db, "default", allowed_agents=["refuser"])
    try:
        await http.post(f"/v1/schedules/{schedule}/trigger")
        (result,) = await _runs(stack.services.client, stack, schedule, 1)
    finally:
        await set_policy(stack.services.db, "default", allowed_agents=None)

    read = (await http.get(f"/v1/schedules/{schedule}")).json()
    assert isinstance(result, FireScheduleResult) and result.outcome == "refused"
    assert read["lastError"] == "agent 'helper' is not allowed for this tenant"
    assert read["lastSubmissionId"] is None
    assert (await http.get(f"/api/chat/{session}/messages")).status_code == 404  # never made


# --- missed occurrences and backfill ----------------------------------------------------------


async def test_a_schedule_makes_up_no_occurrence_missed_by_more_than_a_minute(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")

    description = await stack.services.client.get_schedule_handle(
        created["temporalScheduleId"]
    ).describe()

    assert CATCHUP_WINDOW == timedelta(minutes=1)
    assert description.schedule.policy.catchup_window == CATCHUP_WINDOW


async def test_a_backfill_runs_each_occurrence_of_the_period_once(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(
        http, id=schedule, sessionId=session, prompt="Hi", everySeconds=DAILY, paused=True
    )
    days = _midnights_before(datetime.now(UTC), 2)
    period = {"start": (days[0] - timedelta(hours=1)).isoformat(), "end": days[-1].isoformat()}

    response = await http.post(f"/v1/schedules/{schedule}/backfill", json=period)
    results = await _runs(stack.services.client, stack, schedule, 2)

    assert response.status_code == 202
    assert [datetime.fromisoformat(t) for t in response.json()["occurrences"]] == days
    assert all(result.created for result in results)
    assert len({result.submission_id for result in results}) == 2


@pytest.mark.parametrize(
    ("period", "code"),
    [
        ({"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"}, "invalid_period"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"}, "invalid_period"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2024-01-01T00:00:00Z"}, "too_many_occurrences"),
        ({"start": "2020-01-01T00:00:00", "end": "2020-01-02T00:00:00"}, "invalid_request"),
    ],
    ids=["backwards", "into-the-future", "too-many", "no-time-zone"],
)
async def test_an_invalid_backfill_is_refused(
    http: httpx.AsyncClient, period: dict[str, str], code: str
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@daily", paused=True)

    response = await http.post(f"/v1/schedules/{schedule}/backfill", json=period)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == code


# --- pause, resume, delete --------------------------------------------------------------------


async def test_a_paused_schedule_has_no_next_run_until_resumed(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")
    handle = stack.services.client.get_schedule_handle(created["temporalScheduleId"])

    paused = await http.post(f"/v1/schedules/{schedule}/pause")
    while_paused = (await http.get(f"/v1/schedules/{schedule}")).json()
    in_temporal = (await handle.describe()).schedule.state.paused
    resumed = await http.post(f"/v1/schedules/{schedule}/resume")

    assert paused.json()["paused"] is True and in_temporal is True
    assert while_paused["paused"] is True and while_paused["nextRunTimes"] == []
    assert resumed.json()["paused"] is False
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["nextRunTimes"]
    assert (await handle.describe()).schedule.state.paused is False


async def test_a_deleted_schedule_is_gone_from_the_store_and_from_temporal(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")

    deleted = await http.delete(f"/v1/schedules/{schedule}")

    assert deleted.status_code == 204
    assert (await http.get(f"/v1/schedules/{schedule}")).status_code == 404
    with pytest.raises(RPCError) as missing:
        await stack.services.client.get_schedule_handle(created["temporalScheduleId"]).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_an_unknown_schedule_is_a_404_for_every_action(http: httpx.AsyncClient) -> None:
    schedule, _ = _ids()
    period = {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}

    responses = [
        await http.get(f"/v1/schedules/{schedule}"),
        await http.post(f"/v1/schedules/{schedule}/pause"),
        await http.post(f"/v1/schedules/{schedule}/resume"),
        await http.post(f"/v1/schedules/{schedule}/trigger"),
        await http.post(f"/v1/schedules/{schedule}/backfill", json=period),
        await http.patch(f"/v1/schedules/{schedule}", json={"prompt": "Hello"}),
        await http.delete(f"/v1/schedules/{schedule}"),
    ]

    assert [r.status_code for r in responses] == [404] * 7
    assert {r.json()["error"]["code"] for r in responses} == {"schedule_not_found"}


async def test_a_schedule_whose_temporal_schedule_was_deleted_by_hand_says_so(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    created = await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")
    await stack.services.client.get_schedule_handle(created["temporalScheduleId"]).delete()

    paused = await http.post(f"/v1/schedules/{schedule}/pause")
    deleted = await http.delete(f"/v1/schedules/{schedule}")

    assert paused.status_code == 409
    assert paused.json()["error"]["code"] == "schedule_missing_in_temporal"
    assert deleted.status_code == 204


# --- tenants ----------------------------------------------------------------------------------


async def test_a_tenant_cannot_see_or_change_another_tenants_schedule(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alpha, beta = tenants
    schedule, session = _ids()
    await _create(alpha, id=schedule, sessionId=session, prompt="Hi", cron="@hourly")

    attempts = [
        await beta.get(f"/v1/schedules/{schedule}"),
        await beta.post(f"/v1/schedules/{schedule}/pause"),
        await beta.post(f"/v1/schedules/{schedule}/trigger"),
        await beta.patch(f"/v1/schedules/{schedule}", json={"prompt": "Mine now"}),
        await beta.delete(f"/v1/schedules/{schedule}"),
    ]
    listed = (await beta.get("/v1/schedules", params={"limit": 200})).json()

    assert [r.status_code for r in attempts] == [404] * 5
    assert schedule not in [s["id"] for s in listed["data"]]
    assert (await alpha.get(f"/v1/schedules/{schedule}")).json()["paused"] is False
    assert (await alpha.get(f"/v1/schedules/{schedule}")).json()["prompt"] == "Hi"


async def test_two_tenants_may_use_the_same_schedule_id(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alpha, beta = tenants
    schedule, session = _ids()

    mine = await _create(alpha, id=schedule, sessionId=f"{session}-a", prompt="A", cron="@daily")
    theirs = await _create(beta, id=schedule, sessionId=f"{session}-b", prompt="B", cron="@daily")

    assert mine["temporalScheduleId"] != theirs["temporalScheduleId"]
    assert (await alpha.get(f"/v1/schedules/{schedule}")).json()["prompt"] == "A"


async def test_a_schedule_posts_into_its_tenants_chat_when_another_tenant_uses_that_chat_id(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    alpha, beta = tenants
    schedule, session = _ids()
    await send(beta, session, "beta's chat of that id")
    before = (await beta.get(f"/api/chat/{session}/messages")).json()
    await _create(alpha, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)

    await alpha.post(f"/v1/schedules/{schedule}/trigger")
    messages = await _answered(alpha, session, turns=1)
    fired = await _until(lambda: _events(alpha, session, "schedule.fired"), "the firing's event")

    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["metadata"]["scheduleId"] == schedule
    assert len(fired) == 1
    assert (await alpha.get(f"/v1/schedules/{schedule}")).json()["lastError"] is None
    assert (await beta.get(f"/api/chat/{session}/messages")).json() == before
    assert await _events(beta, session, "schedule.fired") == []


# --- declared on the agent --------------------------------------------------------------------


async def test_a_declared_schedule_is_created_when_the_worker_starts(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    read = (await http.get(f"/v1/schedules/{DECLARED.id}")).json()

    description = await stack.services.client.get_schedule_handle(
        read["temporalScheduleId"]
    ).describe()
    assert (read["source"], read["agent"], read["sessionId"]) == (
        "declared",
        "scheduler",
        DECLARED.session_id,
    )
    assert description.schedule.spec.time_zone_name == "Europe/Paris"
    assert _new_years_midnight_in_paris(read["nextRunTimes"][0])


async def test_a_declared_schedule_fires_into_its_session_with_its_agent(
    http: httpx.AsyncClient,
) -> None:
    await http.post(f"/v1/schedules/{DECLARED.id}/trigger")
    messages = await _answered(http, DECLARED.session_id, turns=1)

    assert messages[0]["parts"] == [{"type": "text", "text": DECLARED.prompt}]
    assert (await http.get(f"/v1/sessions/{DECLARED.session_id}")).json()["agent"] == "scheduler"


async def test_a_declared_schedule_cannot_be_deleted_over_http(http: httpx.AsyncClient) -> None:
    response = await http.delete(f"/v1/schedules/{DECLARED.id}")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "declared_schedule"
    assert (await http.get(f"/v1/schedules/{DECLARED.id}")).status_code == 200


async def test_a_worker_start_restores_a_declared_schedule_but_keeps_it_paused(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    handle = stack.services.client.get_schedule_handle(
        prompt_schedule_id(stack.settings.task_queue, DECLARED.tenant_id, DECLARED.id)
    )

    def hourly(update: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule = update.description.schedule
        schedule.spec.calendars = []  # Temporal keeps a cron expression as a calendar
        schedule.spec.intervals = [ScheduleIntervalSpec(every=timedelta(hours=1))]
        return ScheduleUpdate(schedule=schedule)

    await http.post(f"/v1/schedules/{DECLARED.id}/pause")
    await handle.update(hourly)
    try:
        await sync_declared_schedules(stack.services, load_agents("tests.prompt_schedule_agents"))

        description = await handle.describe()
        assert description.schedule.spec.intervals == []
        assert description.schedule.state.paused is True
        assert (await http.get(f"/v1/schedules/{DECLARED.id}")).json()["paused"] is True
        resumed = (await http.post(f"/v1/schedules/{DECLARED.id}/resume")).json()
        assert resumed["paused"] is False
        next_run = (await http.get(f"/v1/schedules/{DECLARED.id}")).json()["nextRunTimes"][0]
        assert _new_years_midnight_in_paris(next_run)
    finally:
        await http.post(f"/v1/schedules/{DECLARED.id}/resume")


async def test_workers_starting_together_make_one_declared_schedule(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    agents = load_agents("tests.prompt_schedule_agents")

    await asyncio.gather(*(sync_declared_schedules(stack.services, agents) for _ in range(3)))

    listed = (await http.get("/v1/schedules", params={"limit": 200})).json()
    assert [s["id"] for s in listed["data"]].count(DECLARED.id) == 1


class _Undeclared(Scheduler):
    """The same agent after its schedule was removed from the code."""

    schedules = ()


async def test_a_schedule_no_longer_declared_is_deleted_when_a_worker_starts(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    try:
        await sync_declared_schedules(stack.services, AgentRegistry([_Undeclared()]))

        assert (await http.get(f"/v1/schedules/{DECLARED.id}")).status_code == 404
        with pytest.raises(RPCError):
            await stack.services.client.get_schedule_handle(
                prompt_schedule_id(stack.settings.task_queue, DECLARED.tenant_id, DECLARED.id)
            ).describe()
    finally:
        await sync_declared_schedules(stack.services, load_agents("tests.prompt_schedule_agents"))
    assert (await http.get(f"/v1/schedules/{DECLARED.id}")).status_code == 200


async def test_a_declared_id_already_taken_over_http_stops_the_worker_start(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", cron="@daily")

    class Clashing(Scheduler):
        schedules = (DECLARED.model_copy(update={"id": schedule}),)

    with pytest.raises(PromptScheduleConflict, match="created through the API"):
        await sync_declared_schedules(stack.services, AgentRegistry([Clashing()]))
    assert (await http.get(f"/v1/schedules/{schedule}")).json()["source"] == "api"


def test_two_agents_declaring_one_schedule_id_are_refused() -> None:
    class Other(Scheduler):
        name = "other"

    with pytest.raises(ValueError, match="both declare schedule 'new-year'"):
        declared_rows(AgentRegistry([Scheduler(), Other()]))


# --- determinism ------------------------------------------------------------------------------


async def test_an_occurrences_workflow_replays_deterministically(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    schedule, session = _ids()
    await _create(http, id=schedule, sessionId=session, prompt="Hi", everySeconds=3600)
    await http.post(f"/v1/schedules/{schedule}/trigger")
    await _runs(stack.services.client, stack, schedule, 1)
    read = (await http.get(f"/v1/schedules/{schedule}")).json()
    workflow_id = read["recentRuns"][0]["workflowId"]

    history = await stack.services.client.get_workflow_handle(workflow_id).fetch_history()

    await Replayer(
        workflows=[ScheduledPromptWorkflow], data_converter=pydantic_data_converter
    ).replay_workflow(history)
