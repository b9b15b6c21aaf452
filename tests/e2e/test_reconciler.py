"""The reconciler repairs what no workflow serves, so no session is ever blocked."""

import asyncio
import uuid
from datetime import timedelta

import httpx
from temporalio.client import ScheduleIntervalSpec, ScheduleUpdate, ScheduleUpdateInput

from perdure.domain.names import RECONCILER_WORKFLOW, reconciler_schedule_id, turn_workflow_id
from perdure.domain.payloads import ReconcileInput, ReconcileReport
from perdure.runtime.reconciler_schedule import RECONCILE_EVERY, ensure_reconciler_schedule
from perdure.testing.chat_client import counting, key_of, read_stream, send
from perdure.testing.stack import Stack
from storage.intake import submit
from storage.stops import record_stop
from storage.tables import ChatSessionRow
from tests.e2e.test_chat_turn import new_session, wait_for_text, wait_idle
from tests.submitting import user_submission


async def reconcile_now(stack: Stack) -> ReconcileReport:
    report: ReconcileReport = await stack.services.client.execute_workflow(
        RECONCILER_WORKFLOW,
        ReconcileInput(older_than_seconds=0),
        id=f"reconcile-now-{uuid.uuid4().hex[:8]}",
        task_queue=stack.settings.task_queue,
        result_type=ReconcileReport,
    )
    return report


async def test_a_turn_whose_gateway_died_before_starting_it_is_started(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session = new_session()
    # what a gateway leaves behind when it dies between its commit and start_workflow
    recorded = await submit(
        stack.services.db,
        user_submission(session, "@count 12", key="orphan"),
    )

    report = await reconcile_now(stack)

    assert recorded.submission.id in report.started
    await wait_idle(http, session)
    # The whole answer from its first event (`after=-1`), though the turn has ended.
    streamed = await read_stream(http, "GET", f"/api/chat/{session}/stream?after=-1")
    assert streamed.text() == counting(12)
    events = (await http.get(f"/v1/sessions/{session}/events")).json()
    assert [e["data"]["action"] for e in events if e["type"] == "submission.reconciled"] == [
        "started"
    ]


async def test_a_terminated_turn_is_closed_and_its_session_released(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session = new_session()
    stream_task = asyncio.create_task(send(http, session, "@count 400 @delay 10"))
    await wait_for_text(http, session)
    running = (await http.get(f"/v1/sessions/{session}")).json()
    assert running["status"] == "running"
    submission_id = await _running_submission(stack, session)
    await stack.services.client.get_workflow_handle(turn_workflow_id(submission_id)).terminate(
        reason="operator"
    )

    report = await reconcile_now(stack)
    streamed = await stream_task

    assert submission_id in report.closed
    assert streamed.types()[-1] == "error"
    assert "TERMINATED" in streamed.chunks[-1]["errorText"]
    await wait_idle(http, session)
    after = await send(http, session, "@count 3")
    assert after.text() == counting(3)


async def test_every_worker_task_queue_has_a_reconciler_schedule(stack: Stack) -> None:
    handle = stack.services.client.get_schedule_handle(
        reconciler_schedule_id(stack.settings.task_queue)
    )

    description = await handle.describe()

    assert description.schedule.spec.intervals[0].every.total_seconds() == 120


async def _running_submission(stack: Stack, session: str) -> str:
    async with stack.services.db.read() as db_session:
        chat = await db_session.get(ChatSessionRow, key_of(session))
        assert chat is not None and chat.running_submission_id is not None
        return chat.running_submission_id


async def test_a_worker_brings_an_older_schedule_up_to_date(stack: Stack) -> None:
    handle = stack.services.client.get_schedule_handle(
        reconciler_schedule_id(stack.settings.task_queue)
    )

    def slower(update_input: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule = update_input.description.schedule
        schedule.spec.intervals = [ScheduleIntervalSpec(every=timedelta(hours=1))]
        return ScheduleUpdate(schedule=schedule)

    await handle.update(slower)
    await ensure_reconciler_schedule(stack.services.client, task_queue=stack.settings.task_queue)

    description = await handle.describe()
    assert description.schedule.spec.intervals[0].every == RECONCILE_EVERY


async def test_a_cancelled_submission_whose_turn_never_started_is_ended_not_started(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session = new_session()
    recorded = await submit(
        stack.services.db,
        user_submission(session, "@count 3", key="orphan-cancelled"),
    )
    await record_stop(
        stack.services.db,
        session_id=recorded.submission.session_id,
        submission_id=recorded.submission.id,
    )

    report = await reconcile_now(stack)

    assert recorded.submission.id in report.closed
    assert recorded.submission.id not in report.started
    row = (await http.get(f"/v1/sessions/{session}/submissions/{recorded.submission.id}")).json()
    assert row["status"] == "aborted"
    await wait_idle(http, session)
