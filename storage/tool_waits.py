"""Tool waits: the approvals, client tool outputs and MCP servers' questions (`input`) a
parked turn waits on.

A row turns `pending` in the transaction that writes the park's `finish` chunk (an `input`
row: in the one that logs the question, storage/input_waits.py, just before its turn parks),
and leaves `pending` exactly once: answered (`approved`, `denied`, `answered`), `expired` or
`cancelled`. So an answer is accepted only while its turn waits for it, and a late answer, a
repeated one or a forged one changes nothing.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from perdure.domain.payloads import WaitKind
from perdure.domain.ui import Chunk
from storage.chunks import LogWriter, insert_chunks
from storage.db import Database
from storage.errors import StoreError
from storage.tables import SubmissionRow, ToolWaitRow
from storage.timing import now

PENDING = "pending"
ANSWERED = ("approved", "denied", "answered")


class WaitNotFound(StoreError):
    code = "not_found"


class WaitConflict(StoreError):
    """Answered differently before, or no longer waiting (expired, or its turn ended)."""

    code = "conflict"


def new_approval_id() -> str:
    return f"appr_{uuid.uuid4().hex}"


def new_client_wait_id() -> str:
    return f"wait_{uuid.uuid4().hex}"


def new_input_wait_id() -> str:
    return f"input_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class WaitRequest:
    """A call the turn parks on, as the park activity found it in the log."""

    wait_id: str
    kind: WaitKind
    tool_call_id: str
    tool_name: str
    input: Any
    timeout_seconds: float
    round: int = 0


async def park(
    db: Database,
    *,
    submission_id: str,
    message_id: str,
    requests: list[WaitRequest],
    finish: Chunk | None,
    writer: LogWriter,
) -> list[ToolWaitRow]:
    """In one transaction: the wait rows (once per call) and the park's `finish` chunk (None
    when an earlier attempt wrote it). Returns the rows, as first recorded."""
    at = now()

    def record(session: Session) -> list[ToolWaitRow]:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            raise LookupError(f"submission {submission_id} is gone")
        existing = {
            (row.tool_call_id, row.kind, row.round): row
            for row in session.exec(
                select(ToolWaitRow).where(ToolWaitRow.submission_id == submission_id)
            ).all()
        }
        rows: list[ToolWaitRow] = []
        for request in requests:
            row = existing.get((request.tool_call_id, request.kind, request.round))
            if row is None:
                row = ToolWaitRow(
                    id=request.wait_id,
                    kind=request.kind,
                    tenant_id=submission.tenant_id,
                    session_id=submission.session_id,
                    submission_id=submission_id,
                    tool_call_id=request.tool_call_id,
                    tool_name=request.tool_name,
                    input=request.input,
                    status=PENDING,
                    requested_at=at,
                    expires_at=at + request.timeout_seconds,
                )
                session.add(row)
            rows.append(row)
        if finish is not None:
            insert_chunks(
                session,
                message_id=message_id,
                chunks=[finish],
                writer=writer,
                notify=not db.is_sqlite,
            )
        return rows

    return await db.transact(record)


@dataclass(frozen=True)
class WaitAnswer:
    """One answer: to an approval or an input (by its id), or to a client tool call (by the
    call's id)."""

    kind: WaitKind
    key: str
    """The approval or input wait id, or the tool call id of a client tool."""
    approved: bool | None = None
    reason: str | None = None
    output: Any = None
    error_text: str | None = None

    def same_as(self, row: ToolWaitRow) -> bool:
        if self.kind == "approval":
            return row.approved is self.approved
        return row.output == self.output and row.error_text == self.error_text


@dataclass(frozen=True)
class Answered:
    row: ToolWaitRow
    changed: bool
    """False when the same answer was already recorded (nothing new to tell the turn)."""


def _status_for(answer: WaitAnswer) -> str:
    if answer.kind in ("client", "input"):
        return "answered"
    return "approved" if answer.approved else "denied"


def _row_for(session: Session, tenant_id: str, session_id: str, answer: WaitAnswer) -> ToolWaitRow:
    by_id = answer.kind in ("approval", "input")
    key = col(ToolWaitRow.id) if by_id else col(ToolWaitRow.tool_call_id)
    found = (
        session.exec(
            select(ToolWaitRow)
            .where(
                key == answer.key,
                ToolWaitRow.kind == answer.kind,
                ToolWaitRow.tenant_id == tenant_id,
                ToolWaitRow.session_id == session_id,
            )
            .order_by(col(ToolWaitRow.requested_at).desc())
            .with_for_update()
        )
    ).first()
    if found is None:
        what = _WHAT[answer.kind]
        raise WaitNotFound(f"no {what} {answer.key!r} in this session")  # not its storage key
    return found


async def answer_waits(
    db: Database, *, tenant_id: str, session_id: str, answers: list[WaitAnswer]
) -> list[Answered]:
    """Record answers, all or none: an unknown one is `WaitNotFound`; one answered otherwise
    before, or no longer waiting, is `WaitConflict`; the same answer again changes nothing."""
    at = now()

    def record(session: Session) -> list[Answered]:
        results: list[Answered] = []
        for answer in answers:
            row = _row_for(session, tenant_id, session_id, answer)
            if row.status in ANSWERED and answer.same_as(row):
                results.append(Answered(row, changed=False))
                continue
            if row.status != PENDING:
                raise WaitConflict(_closed_because(row))
            row.status = _status_for(answer)
            row.approved = answer.approved
            row.reason = answer.reason
            row.output = answer.output
            row.error_text = answer.error_text
            row.answered_at = at
            session.add(row)
            results.append(Answered(row, changed=True))
        return results

    return await db.transact(record)


_WHAT: dict[str, str] = {
    "approval": "approval",
    "client": "client tool call",
    "input": "input request",
}


def _closed_because(row: ToolWaitRow) -> str:
    name = (
        f"tool call {row.tool_call_id}" if row.kind == "client" else f"{_WHAT[row.kind]} {row.id}"
    )
    if row.status in ANSWERED:
        return f"{name} was already answered differently ({row.status})"
    if row.status == "expired":
        return f"{name} expired before it was answered"
    return f"{name} is no longer waiting: its turn ended"


async def waits_by_id(db: Database, wait_ids: list[str]) -> list[ToolWaitRow]:
    if not wait_ids:
        return []
    return await db.read_sync(
        lambda session: list(
            session.exec(select(ToolWaitRow).where(col(ToolWaitRow.id).in_(wait_ids)))
        )
    )


async def expire_waits(db: Database, *, wait_ids: list[str], reason: str) -> None:
    """Deny the waits that are still pending (an answer stored first wins)."""
    if not wait_ids:
        return
    async with db.write() as session:
        await session.exec(
            update(ToolWaitRow)
            .where(col(ToolWaitRow.id).in_(wait_ids), col(ToolWaitRow.status) == PENDING)
            .values(status="expired", reason=reason, answered_at=now())
        )


def cancel_pending(session: Session, *, submission_id: str, reason: str) -> None:
    """Inside the finish transaction: the turn ended, nothing it waited on can be answered."""
    session.exec(
        update(ToolWaitRow)
        .where(col(ToolWaitRow.submission_id) == submission_id, col(ToolWaitRow.status) == PENDING)
        .values(status="cancelled", reason=reason, answered_at=now())
    )


async def list_pending(
    db: Database, *, tenant_id: str, session_id: str, kind: WaitKind | None = None
) -> list[ToolWaitRow]:
    query = select(ToolWaitRow).where(
        ToolWaitRow.tenant_id == tenant_id,
        ToolWaitRow.session_id == session_id,
        ToolWaitRow.status == PENDING,
    )
    if kind is not None:
        query = query.where(ToolWaitRow.kind == kind)
    statement = query.order_by(col(ToolWaitRow.requested_at), col(ToolWaitRow.id))
    return await db.read_sync(lambda session: list(session.exec(statement)))


async def sessions_waiting(db: Database, *, session_ids: list[str]) -> set[str]:
    """Those of `session_ids` whose running turn waits on something."""
    if not session_ids:
        return set()
    statement = select(ToolWaitRow.session_id).where(
        col(ToolWaitRow.session_id).in_(session_ids), ToolWaitRow.status == PENDING
    )
    return await db.read_sync(lambda session: set(session.exec(statement)))


async def client_calls_of(db: Database, *, submission_id: str) -> set[str]:
    """The tool call ids of the turn's client tool calls, answered or not."""
    statement = select(ToolWaitRow.tool_call_id).where(
        ToolWaitRow.submission_id == submission_id, ToolWaitRow.kind == "client"
    )
    return await db.read_sync(lambda session: set(session.exec(statement)))
