"""Storage hygiene: stored answers within the row limit, `max_persisted_messages`, closed
chunk logs pruned after the retention period, and a deleted session leaving no row behind."""

import asyncio
import json
import uuid
from typing import Any

import httpx
import sqlalchemy as sa
from sqlmodel import SQLModel, col, select
from temporalio.client import WorkflowExecutionStatus

import storage.fiber_tables  # noqa: F401 - every table is checked after a delete
import storage.schedule_tables  # noqa: F401
from perdure.domain.names import RECONCILER_WORKFLOW, turn_workflow_id
from perdure.domain.payloads import ReconcileInput, ReconcileReport
from perdure.domain.storage_hygiene import ROW_MAX_BYTES
from perdure.testing.chat_client import counting, key_of, read_stream, send
from perdure.testing.stack import Stack
from storage.chunks import LogWriter, insert_chunks
from storage.compactions import save_compaction, session_compactions
from storage.db import Database
from storage.hygiene import prune_closed_logs, trim_messages
from storage.messages import active_path
from storage.tables import ChatSessionRow, ChunkLogRow, ChunkRow, MessageRow, SubmissionRow
from storage.timing import now
from tests.e2e.message_trees import chain, tree

EIGHT_DAYS = 8 * 24 * 3600.0
WRITER = LogWriter(key="test", attempt=1)


def new_session() -> str:
    return f"hygiene-{uuid.uuid4().hex[:12]}"


# --- the message tree, in a store of its own -------------------------------------------------


async def parents(store: Database, session_id: str) -> dict[str, str | None]:
    async with store.read() as session:
        rows = await session.exec(select(MessageRow).where(MessageRow.session_id == session_id))
        return {row.id: row.parent_id for row in rows.all()}


async def path_ids(store: Database, session_id: str) -> list[str]:
    return [m.id for m in await active_path(store, session_id=session_id)]


async def test_trimming_keeps_the_newest_messages_and_the_oldest_kept_becomes_the_root(
    store: Database,
) -> None:
    session_id = await tree(store, chain(6), leaf="m5")

    deleted = await trim_messages(store, session_id=session_id, keep=3)

    assert deleted == 3
    assert await parents(store, session_id) == {"m3": None, "m4": "m3", "m5": "m4"}
    assert await path_ids(store, session_id) == ["m3", "m4", "m5"]


async def test_trimming_within_the_limit_deletes_nothing(store: Database) -> None:
    session_id = await tree(store, chain(3), leaf="m2")

    assert await trim_messages(store, session_id=session_id, keep=3) == 0
    assert await path_ids(store, session_id) == ["m0", "m1", "m2"]


async def test_the_active_path_is_kept_even_when_another_branch_is_newer(store: Database) -> None:
    # m0 → m1 → m2 is active; b1 → b2 branch off m0 later (an edit the user switched away from)
    edges = [*chain(3), ("b1", "m0"), ("b2", "b1")]
    session_id = await tree(store, edges, leaf="m2")

    await trim_messages(store, session_id=session_id, keep=2)

    assert await parents(store, session_id) == {"m1": None, "m2": "m1"}
    assert await path_ids(store, session_id) == ["m1", "m2"]


async def test_older_branches_go_first_when_the_active_path_is_short(store: Database) -> None:
    # b1 → b2 are the oldest; the active path c0 → c1 was started after them
    edges = [("b1", None), ("b2", "b1"), ("c0", None), ("c1", "c0")]
    session_id = await tree(store, edges, leaf="c1")

    await trim_messages(store, session_id=session_id, keep=3)

    assert await parents(store, session_id) == {"b2": None, "c0": None, "c1": "c0"}
    assert await path_ids(store, session_id) == ["c0", "c1"]


async def test_the_messages_of_a_running_turn_are_never_trimmed(store: Database) -> None:
    # the user switched the leaf to another branch while the turn of m1 runs
    session_id = await tree(store, [*chain(2), ("x", None), ("y", "x")], leaf="y")
    async with store.write() as session:
        message = await session.get(MessageRow, (session_id, "m1"))
        assert message is not None
        message.submission_id = "running-turn"
        session.add(message)
        session.add(
            SubmissionRow(
                id="running-turn",
                session_id=session_id,
                tenant_id="t",
                idempotency_key=uuid.uuid4().hex,
                status="running",
                agent="a",
                user_message={},
                user_message_id="m1",
                assistant_message_id=f"msg_{uuid.uuid4().hex[:24]}",
                created_at=1.0,
            )
        )

    await trim_messages(store, session_id=session_id, keep=2)

    assert await parents(store, session_id) == {"m1": None, "x": None, "y": "x"}


async def test_a_summary_of_trimmed_messages_goes_with_them(store: Database) -> None:
    session_id = await tree(store, chain(6), leaf="m5")
    for up_to in ("m1", "m3"):
        await save_compaction(
            store,
            session_id=session_id,
            up_to_message_id=up_to,
            summary=f"up to {up_to}",
            tokens_before=10,
            tokens_after=1,
        )

    await trim_messages(store, session_id=session_id, keep=3)

    kept = await session_compactions(store, session_id=session_id)
    assert [row.up_to_message_id for row in kept] == ["m3"]


async def test_one_trim_deletes_at_most_a_batch_and_later_trims_finish_the_job(
    store: Database,
) -> None:
    session_id = await tree(store, chain(10), leaf="m9")

    first = await trim_messages(store, session_id=session_id, keep=2, batch=5)
    second = await trim_messages(store, session_id=session_id, keep=2, batch=5)

    assert (first, second) == (5, 3)
    assert await path_ids(store, session_id) == ["m8", "m9"]


# --- pruning closed chunk logs, in a store of its own ------------------------------------


async def closed_log(store: Database, *, closed_ago: float, chunks: int = 3) -> str:
    message_id = f"msg_{uuid.uuid4().hex[:24]}"
    body = [{"type": "text-delta", "id": "t", "delta": "x"}] * (chunks - 1)
    await store.transact(
        lambda session: insert_chunks(
            session,
            message_id=message_id,
            chunks=[*body, {"type": "finish"}],
            writer=WRITER,
            notify=False,
            close=True,
        )
    )
    await age(store, message_id, closed_ago)
    return message_id


async def age(store: Database, message_id: str, seconds: float) -> None:
    async with store.write() as session:
        log = await session.get(ChunkLogRow, message_id)
        assert log is not None and log.closed_at is not None
        log.closed_at -= seconds
        session.add(log)


async def chunk_count(db: Database, message_id: str) -> int:
    async with db.read() as session:
        rows = await session.exec(select(ChunkRow.seq).where(ChunkRow.message_id == message_id))
        return len(rows.all())


async def log_row(db: Database, message_id: str) -> ChunkLogRow | None:
    async with db.read() as session:
        return await session.get(ChunkLogRow, message_id)


async def test_logs_closed_before_the_cutoff_lose_their_chunks_and_keep_their_row(
    store: Database,
) -> None:
    old = await closed_log(store, closed_ago=EIGHT_DAYS)
    recent = await closed_log(store, closed_ago=60)
    open_log = f"msg_{uuid.uuid4().hex[:24]}"
    await store.transact(
        lambda session: insert_chunks(
            session, message_id=open_log, chunks=[{"type": "start"}], writer=WRITER, notify=False
        )
    )

    pruned = await prune_closed_logs(store, closed_before=now() - 7 * 24 * 3600)

    assert (pruned.logs, pruned.chunks) == (1, 3)
    assert [await chunk_count(store, m) for m in (old, recent, open_log)] == [0, 3, 1]
    row = await log_row(store, old)
    assert row is not None and row.pruned_at is not None and row.next_seq == 3
    assert (await prune_closed_logs(store, closed_before=now() - 7 * 24 * 3600)).logs == 0


async def test_a_prune_batch_is_bounded_by_logs_and_by_chunks(store: Database) -> None:
    logs = [await closed_log(store, closed_ago=EIGHT_DAYS, chunks=10) for _ in range(5)]

    by_logs = await prune_closed_logs(store, closed_before=now(), logs=2)
    by_chunks = await prune_closed_logs(store, closed_before=now(), chunks=15)
    rest = await prune_closed_logs(store, closed_before=now())

    assert [by_logs.logs, by_chunks.logs, rest.logs] == [2, 1, 2]
    assert [await chunk_count(store, m) for m in logs] == [0] * 5


async def test_a_sub_agents_closed_log_is_kept_while_its_parents_turn_is_active(
    store: Database,
) -> None:
    parent, child = new_session(), new_session()
    child_log = await closed_log(store, closed_ago=EIGHT_DAYS)
    async with store.write() as session:
        session.add(
            ChatSessionRow(
                id=parent, tenant_id="t", chat_id=parent, agent="a", created_at=1, updated_at=1
            )
        )
        session.add(
            ChatSessionRow(
                id=child,
                tenant_id="t",
                chat_id=child,
                agent="a",
                created_at=1,
                updated_at=1,
                parent_session_id=parent,
            )
        )
        for session_id, status, answer in (
            (parent, "running", f"msg_{uuid.uuid4().hex[:24]}"),
            (child, "completed", child_log),
        ):
            session.add(
                SubmissionRow(
                    id=uuid.uuid4().hex,
                    session_id=session_id,
                    tenant_id="t",
                    idempotency_key=uuid.uuid4().hex,
                    status=status,
                    agent="a",
                    user_message={},
                    user_message_id=uuid.uuid4().hex,
                    assistant_message_id=answer,
                    created_at=1.0,
                )
            )

    while_running = await prune_closed_logs(store, closed_before=now())
    async with store.write() as session:
        await (await session.connection()).execute(
            sa.update(SubmissionRow)
            .where(col(SubmissionRow.session_id) == parent)
            .values(status="completed")
        )
    once_ended = await prune_closed_logs(store, closed_before=now())

    assert (while_running.logs, once_ended.logs) == (0, 1)


# --- end to end, over HTTP with Temporal -------------------------------------------------


async def reconcile_now(stack: Stack) -> ReconcileReport:
    report: ReconcileReport = await stack.services.client.execute_workflow(
        RECONCILER_WORKFLOW,
        ReconcileInput(older_than_seconds=0),
        id=f"reconcile-hygiene-{uuid.uuid4().hex[:8]}",
        task_queue=stack.settings.task_queue,
        result_type=ReconcileReport,
    )
    return report


async def test_an_answer_over_the_row_limit_is_stored_compacted_and_says_so(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    size = 1_900 * 1024

    streamed = await send(http, session, '@tool blob {"kib": 1900}', agent="hoarder")
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    follow_up = await send(http, session, "@count 3", agent="hoarder")

    streamed_output = next(c for c in streamed.chunks if c["type"] == "tool-output-available")
    assert len(streamed_output["output"]) == size  # the stream is the log, as streamed
    answer = history[-1]
    tool_part = next(p for p in answer["parts"] if p["type"] == "tool-blob")
    text_index = next(i for i, p in enumerate(answer["parts"]) if p["type"] == "text")
    assert tool_part["output"].endswith(
        f"[output truncated for storage: 1000 of {size} bytes kept]"
    )
    assert answer["parts"][text_index]["text"].startswith(
        f"[Text truncated for storage ({len(streamed.text())} chars). "
        "First 500 chars: Tool blob returned: xxx"
    )
    metadata = answer["metadata"]
    assert metadata["compactedToolOutputs"] == [tool_part["toolCallId"]]
    assert metadata["compactedTextParts"] == [text_index]
    assert metadata["compactedFromBytes"] > ROW_MAX_BYTES
    assert len(json.dumps(answer["parts"])) < ROW_MAX_BYTES
    assert follow_up.text() == counting(3)


async def test_a_session_keeps_at_most_max_persisted_messages(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    session = new_session()

    for n in (1, 2, 3):
        streamed = await send(http, session, f"@count {n}", agent="forgetful")
        # the trim follows the finish that ended the stream; the turn's workflow ends after it
        await turn_ended(stack, streamed.headers["x-perdure-submission-id"])
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    kept = await parents(stack.services.db, key_of(session))
    fourth = await send(http, session, "@count 4", agent="forgetful")

    assert [m["role"] for m in history] == ["assistant", "user", "assistant"]
    assert [part_text(m) for m in history] == [counting(2), "@count 3", counting(3)]
    assert len(kept) == 3
    assert kept[history[0]["id"]] is None  # the oldest kept message is the root
    assert fourth.text() == counting(4)


def part_text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


async def test_a_pruned_answer_cannot_be_resumed_and_stays_in_the_history(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    session = new_session()
    streamed = await send(http, session, "@count 20")
    message_id = streamed.chunks[0]["messageId"]
    await age(stack.services.db, message_id, EIGHT_DAYS)

    report = await reconcile_now(stack)
    midway = await http.get(
        f"/api/chat/{session}/stream", headers={"Last-Event-ID": streamed.event_ids[3]}
    )
    at_end = await read_stream(
        http,
        "GET",
        f"/api/chat/{session}/stream",
        headers={"Last-Event-ID": streamed.last_event_id},
    )
    history = (await http.get(f"/api/chat/{session}/messages")).json()

    assert report.pruned_logs >= 1
    assert await chunk_count(stack.services.db, message_id) == 0
    assert midway.status_code == 410
    error = midway.json()["error"]
    assert error["code"] == "answer_pruned"
    assert "PERDURE_CHUNK_RETENTION_HOURS" in error["message"]
    assert error["submissionId"] == streamed.headers["x-perdure-submission-id"]
    assert (at_end.status, at_end.events, at_end.done) == (200, [], True)
    assert part_text(history[-1]) == counting(20)


async def test_deleting_a_session_leaves_no_row_of_it_in_any_table(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    db = stack.services.db
    session = new_session()
    # a recovered turn (an incident and its events), a sub-agent's turn (a child session),
    # and a sub-agent that waits for an approval (a tool wait) while its parent waits on it
    await send(http, session, f"@count 5 @fail 503 x1 {uuid.uuid4().hex[:8]}", agent="manager")
    await send(http, session, '@tool research {"task": "@count 3"}', agent="manager")
    task = json.dumps({"task": '@tool delete_file {"path": "gone.txt"}'})
    parked = asyncio.create_task(send(http, session, f"@tool ask_approver {task}"))
    await until_a_child_waits(http, session)
    history = (await http.get(f"/api/chat/{session}/messages")).json()
    await save_compaction(
        db,
        session_id=key_of(session),
        up_to_message_id=history[1]["id"],
        summary="the user counted",
        tokens_before=100,
        tokens_after=10,
    )
    await http.put(f"/v1/sessions/{session}/files/notes.txt", content="kept with the session")
    ids = await owned_ids(db, key_of(session))
    before = await rows_naming(db, ids)

    deleted = await http.delete(f"/v1/sessions/{session}")
    await parked
    await until_turns_ended(stack, ids["submission"])
    after = await rows_naming(db, ids)

    kinds = {"sessions", "messages", "submissions", "chunks", "chunk_logs", "events"}
    assert kinds | {
        "incidents",
        "tool_waits",
        "compactions",
        "workspaces",
        "workspace_files",
    } <= set(before)
    assert deleted.status_code == 204
    assert after == {}


async def until_a_child_waits(http: httpx.AsyncClient, session: str) -> None:
    async with asyncio.timeout(30):
        while True:
            response = await http.get(f"/v1/sessions/{session}/children")
            children = response.json() if response.status_code == 200 else []
            if any(child["status"] == "waiting" for child in children):
                return
            await asyncio.sleep(0.1)


async def owned_ids(db: Database, session_id: str) -> dict[str, set[str]]:
    """Every id of the session and of its sub-agent sessions (their keys and chat ids)."""
    async with db.read() as session:
        chats = (
            await session.exec(
                select(ChatSessionRow.id, ChatSessionRow.chat_id).where(
                    sa.or_(
                        col(ChatSessionRow.id) == session_id,
                        col(ChatSessionRow.parent_session_id) == session_id,
                    )
                )
            )
        ).all()
        sessions = {key for key, _ in chats}
        submissions = (
            await session.exec(
                select(SubmissionRow).where(col(SubmissionRow.session_id).in_(sessions))
            )
        ).all()
    return {
        "session": sessions,
        "chat": {chat_id for _, chat_id in chats},
        "submission": {s.id for s in submissions},
        "message": {s.assistant_message_id for s in submissions}
        | {s.user_message_id for s in submissions},
    }


async def rows_naming(db: Database, ids: dict[str, set[str]]) -> dict[str, int]:
    """Per table, the rows any of whose text columns holds one of `ids` (every table Perdure
    has, so a table added later is checked too)."""
    wanted = sorted(set().union(*ids.values()))
    found: dict[str, int] = {}
    async with db.read() as session:
        connection = await session.connection()
        for table in SQLModel.metadata.sorted_tables:
            text_columns = [c for c in table.columns if is_text(c)]
            if not text_columns:
                continue
            matches = sa.or_(*(c.in_(wanted) for c in text_columns))
            count = (
                await connection.execute(
                    sa.select(sa.func.count()).select_from(table).where(matches)
                )
            ).scalar_one()
            if count:
                found[table.name] = count
    return found


async def turn_ended(stack: Stack, submission_id: str) -> None:
    async with asyncio.timeout(30):
        await stack.services.client.get_workflow_handle(turn_workflow_id(submission_id)).result()


def is_text(column: sa.Column[Any]) -> bool:
    kind = column.type
    return isinstance(kind.impl if isinstance(kind, sa.TypeDecorator) else kind, sa.String)


async def until_turns_ended(stack: Stack, submission_ids: set[str]) -> None:
    """Cancelled turns (the sub-agent's too) have run their last activity."""
    async with asyncio.timeout(60):
        for submission_id in submission_ids:
            handle = stack.services.client.get_workflow_handle(turn_workflow_id(submission_id))
            while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await asyncio.sleep(0.1)
