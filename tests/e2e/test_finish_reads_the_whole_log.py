"""The finish stores the reduction of the whole log: chunks a stopped model step still wrote
after the finisher began (a stop does not wait for the step it cancels) are in the stored
answer, not only in the log."""

import uuid
from typing import Any

import pytest

import activities.finish
from activities.finish import TurnFinisher
from perdure.agents_registry import load_agents
from perdure.domain.payloads import FinishTurnInput, TurnRef
from perdure.domain.ui import Chunk
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.bus import ChunkBus
from storage.chunks import LogWriter, append_chunks, load_log, read_chunks
from storage.db import Database
from storage.intake import submit
from storage.messages import stored_message
from tests.submitting import user_submission

STEP = LogWriter(key="activity:1", attempt=1)


async def test_chunks_written_after_the_finish_began_are_in_the_stored_answer(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    label = uuid.uuid4().hex[:8]
    submission = (
        await submit(
            store,
            user_submission(f"finish-{label}", f"hello {label}", key=f"finish-{label}"),
        )
    ).submission
    message_id = submission.assistant_message_id
    early: list[Chunk] = [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "1 2"},
    ]
    await append_chunks(store, message_id=message_id, chunks=early, writer=STEP)
    await append_chunks(  # what the step wrote after any read the finisher made before
        store,
        message_id=message_id,
        chunks=[{"type": "text-delta", "id": "t", "delta": " 3 4"}],
        writer=STEP,
    )

    async def read_before_the_last_chunk(
        db: Database, *, message_id: str
    ) -> list[tuple[int, Chunk]]:
        return (await read_chunks(db, message_id=message_id))[: len(early)]

    monkeypatch.setattr(activities.finish, "read_chunks", read_before_the_last_chunk)
    lifecycle: Any = SubmissionLifecycle(store, None, task_queue="unused")  # type: ignore[arg-type]
    finisher = TurnFinisher(
        db=store,
        bus=ChunkBus(reliable=True),
        agents=load_agents("perdure.testing.agents.chat"),
        lifecycle=lifecycle,
    )

    await finisher.finish(
        FinishTurnInput(
            turn=TurnRef(
                submission_id=submission.id,
                session_id=submission.session_id,
                assistant_message_id=message_id,
                agent="default",
            ),
            outcome="aborted",
        ),
        writer=LogWriter(key="activity:finish", attempt=1),
    )

    stored = await stored_message(
        store, tenant_id="default", chat_id=f"finish-{label}", message_id=message_id
    )
    assert stored is not None
    assert "".join(p.get("text", "") for p in stored.parts if p["type"] == "text") == "1 2 3 4"
    logged = await load_log(store, message_id=message_id)
    assert [c["type"] for c in logged][-3:] == ["text-end", "finish-step", "abort"]
