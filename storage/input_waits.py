"""An MCP call's questions as tool waits (kind `input`): one row per round the server asks,
holding the questions and the server's opaque request state, so any worker can send the
answer back with the state. docs/mcp.md#input-required.
"""

from typing import Any

from sqlmodel import Session, col, select

from perdure.domain.input_requests import InputQuestion
from perdure.domain.ui import Chunk
from storage.chunks import LogWriter, insert_chunks
from storage.db import Database
from storage.tables import SubmissionRow, ToolWaitRow
from storage.timing import now
from storage.tool_waits import PENDING, new_input_wait_id


def questions_of(row: ToolWaitRow) -> list[InputQuestion]:
    stored = row.input if isinstance(row.input, dict) else {}
    return [InputQuestion.model_validate(item) for item in stored.get("questions", [])]


def request_state_of(row: ToolWaitRow) -> str | None:
    stored = row.input if isinstance(row.input, dict) else {}
    state = stored.get("requestState")
    return state if isinstance(state, str) else None


def _stored(questions: list[InputQuestion], request_state: str | None) -> dict[str, Any]:
    return {
        "questions": [question.model_dump() for question in questions],
        "requestState": request_state,
    }


async def record_input_round(
    db: Database,
    *,
    submission_id: str,
    message_id: str,
    tool_call_id: str,
    tool_name: str,
    round: int,
    questions: list[InputQuestion],
    request_state: str | None,
    timeout_seconds: float,
    chunk: Chunk,
    writer: LogWriter,
) -> ToolWaitRow:
    """In one transaction: the round's wait, pending, and `chunk` (the questions, for the
    client). The writer's fence makes a superseded attempt's round fail whole."""
    at = now()

    def record(session: Session) -> ToolWaitRow:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            raise LookupError(f"submission {submission_id} is gone")
        row = ToolWaitRow(
            id=str(chunk.get("id") or new_input_wait_id()),
            kind="input",
            tenant_id=submission.tenant_id,
            session_id=submission.session_id,
            submission_id=submission_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            round=round,
            input=_stored(questions, request_state),
            status=PENDING,
            requested_at=at,
            expires_at=at + timeout_seconds,
        )
        session.add(row)
        insert_chunks(
            session, message_id=message_id, chunks=[chunk], writer=writer, notify=not db.is_sqlite
        )
        return row

    return await db.transact(record)


async def input_rounds(db: Database, *, submission_id: str, tool_call_id: str) -> list[ToolWaitRow]:
    """The call's rounds so far, the latest last."""
    statement = (
        select(ToolWaitRow)
        .where(
            ToolWaitRow.submission_id == submission_id,
            ToolWaitRow.tool_call_id == tool_call_id,
            ToolWaitRow.kind == "input",
        )
        .order_by(col(ToolWaitRow.round))
    )
    return await db.read_sync(lambda session: list(session.exec(statement)))


async def last_inputs(db: Database, *, submission_id: str) -> dict[str, ToolWaitRow]:
    """Each call's last round, by tool call id, however it stands: a park run again (its
    worker died before the workflow recorded it) finds the round it parked on even once
    answered."""
    statement = (
        select(ToolWaitRow)
        .where(ToolWaitRow.submission_id == submission_id, ToolWaitRow.kind == "input")
        .order_by(col(ToolWaitRow.round))
    )
    rows = await db.read_sync(lambda session: list(session.exec(statement)))
    return {row.tool_call_id: row for row in rows}


async def input_wait(
    db: Database, *, tenant_id: str, session_id: str, wait_id: str
) -> ToolWaitRow | None:
    """One round, as the gateway checks an answer against its questions."""
    statement = select(ToolWaitRow).where(
        ToolWaitRow.id == wait_id,
        ToolWaitRow.kind == "input",
        ToolWaitRow.tenant_id == tenant_id,
        ToolWaitRow.session_id == session_id,
    )
    return await db.read_sync(lambda session: session.exec(statement).first())
