"""A session's FIFO queue is ordered by the store, not by a gateway's clock; a follow-up that a
recovery-boot plan drops ends `skipped` in the plan's own transaction."""

import asyncio
import uuid

import pytest

from perdure.testing.chat_client import key_of
from storage.admission import apply_recovery_plan, queued_after
from storage.chunks import LogWriter, load_log
from storage.db import Database
from storage.intake import submit
from storage.submission_reads import get_submission
from storage.tables import SubmissionRow
from tests.submitting import user_submission


async def submit_text(store: Database, session: str, text: str) -> SubmissionRow:
    outcome = await submit(
        store,
        user_submission(session, text, key=f"key:{text}", tenant_id="t"),
    )
    return outcome.submission


async def test_the_queue_keeps_arrival_order_when_a_gateways_clock_runs_behind(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    clock = iter([1000.0, 999.0, 998.0])  # each gateway that takes the next request is behind
    monkeypatch.setattr("storage.intake.now", lambda: next(clock))

    running = await submit_text(store, session, "first")
    second = await submit_text(store, session, "second")
    third = await submit_text(store, session, "third")

    assert running.status == "running"
    assert [s.id for s in await queued_after(store, session_id=key_of(session, "t"))] == [
        second.id,
        third.id,
    ]


async def test_a_dropped_follow_up_is_skipped_and_its_log_closed_in_the_plans_transaction(
    store: Database,
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await submit_text(store, session, "interrupted")
    kept = await submit_text(store, session, "kept")
    dropped = await submit_text(store, session, "dropped")

    await apply_recovery_plan(
        store,
        session_id=key_of(session, "t"),
        keep=[kept.id],
        skip=[dropped.id],
        writer=LogWriter("activity:1", 2),
    )

    after = await get_submission(store, dropped.id)
    assert after is not None and after.status == "skipped"
    logged = await load_log(store, message_id=dropped.assistant_message_id)
    assert [c["type"] for c in logged] == ["start", "abort"]
    assert [s.id for s in await queued_after(store, session_id=key_of(session, "t"))] == [kept.id]


async def test_a_recovery_plan_can_reorder_the_queue(store: Database) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    await submit_text(store, session, "interrupted")
    older = await submit_text(store, session, "older")
    newer = await submit_text(store, session, "newer")

    await apply_recovery_plan(
        store,
        session_id=key_of(session, "t"),
        keep=[newer.id, older.id],
        skip=[],
        writer=LogWriter("a", 2),
    )

    assert [s.id for s in await queued_after(store, session_id=key_of(session, "t"))] == [
        newer.id,
        older.id,
    ]


async def test_first_messages_racing_to_create_a_session_are_all_kept_in_one_queue(
    store: Database,
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    texts = [f"racer {n}" for n in range(4)]

    recorded = await asyncio.gather(*(submit_text(store, session, text) for text in texts))

    assert sorted(s.status for s in recorded) == ["pending", "pending", "pending", "running"]
    assert len({s.queue_seq for s in recorded}) == len(texts)
    running = next(s for s in recorded if s.status == "running")
    assert {s.id for s in await queued_after(store, session_id=key_of(session, "t"))} == {
        s.id for s in recorded if s is not running
    }
