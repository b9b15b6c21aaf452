"""Out of band: list and answer the approvals, client tool calls and MCP servers' questions
(inputs) a parked turn waits on."""

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path

from gateway.body_limits import body_limit, message_bytes
from gateway.deps import DbDep, OwnedSessionDep, TemporalDep, TenantDep
from gateway.input_answers import checked_input_answer
from gateway.schemas.waits import (
    ApprovalAnswer,
    ApprovalPublic,
    ClientToolCallPublic,
    ClientToolOutput,
    InputAnswerBody,
    InputQuestionPublic,
    InputRequestPublic,
    WaitAnswerResult,
)
from gateway.waits import record_answers
from storage.input_waits import questions_of
from storage.tables import ToolWaitRow
from storage.tool_waits import WaitAnswer, list_pending

router = APIRouter(prefix="/v1/sessions", tags=["waits"])

WaitIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_\-]{1,64}$")]
ToolCallIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_\-.:]{1,200}$")]


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _result(row: ToolWaitRow, changed: bool) -> WaitAnswerResult:
    return WaitAnswerResult(
        id=row.id,
        toolCallId=row.tool_call_id,
        status=row.status,
        submissionId=row.submission_id,
        changed=changed,
    )


def _common(row: ToolWaitRow) -> dict[str, Any]:
    return {
        "toolCallId": row.tool_call_id,
        "toolName": row.tool_name,
        "input": row.input,
        "submissionId": row.submission_id,
        "requestedAt": _time(row.requested_at),
        "expiresAt": _time(row.expires_at),
    }


@router.get("/{session_id}/approvals", summary="The approvals the session's turn waits on")
async def pending_approvals(
    session: OwnedSessionDep, db: DbDep, tenant: TenantDep
) -> list[ApprovalPublic]:
    rows = await list_pending(db, tenant_id=tenant, session_id=session.id, kind="approval")
    return [ApprovalPublic(approvalId=row.id, **_common(row)) for row in rows]


@router.post(
    "/{session_id}/approvals/{approval_id}",
    summary="Approve or deny a tool call; the turn goes on",
)
async def answer_approval(
    answer: ApprovalAnswer,
    session: OwnedSessionDep,
    approval_id: WaitIdPath,
    db: DbDep,
    client: TemporalDep,
    tenant: TenantDep,
) -> WaitAnswerResult:
    """The same answer twice is idempotent (`changed: false`); another answer after the first
    is a 409, as is one after the approval expired or its turn ended; an unknown id a 404."""
    (done,) = await record_answers(
        db,
        client,
        tenant,
        session.id,
        [
            WaitAnswer(
                kind="approval", key=approval_id, approved=answer.approved, reason=answer.reason
            )
        ],
    )
    return _result(done.row, done.changed)


@router.get("/{session_id}/tool-calls", summary="The client tool calls the session's turn waits on")
async def pending_client_calls(
    session: OwnedSessionDep, db: DbDep, tenant: TenantDep
) -> list[ClientToolCallPublic]:
    rows = await list_pending(db, tenant_id=tenant, session_id=session.id, kind="client")
    return [ClientToolCallPublic(**_common(row)) for row in rows]


@router.post(
    "/{session_id}/tool-calls/{tool_call_id}",
    summary="Send a client tool's output (or error); the turn goes on",
)
@body_limit(message_bytes)
async def answer_client_call(
    answer: ClientToolOutput,
    session: OwnedSessionDep,
    tool_call_id: ToolCallIdPath,
    db: DbDep,
    client: TemporalDep,
    tenant: TenantDep,
) -> WaitAnswerResult:
    """As for approvals: a repeat is idempotent, a different second answer is a 409. The body
    may be up to `PERDURE_MAX_MESSAGE_BYTES`."""
    (done,) = await record_answers(
        db,
        client,
        tenant,
        session.id,
        [
            WaitAnswer(
                kind="client", key=tool_call_id, output=answer.output, error_text=answer.errorText
            )
        ],
    )
    return _result(done.row, done.changed)


@router.get(
    "/{session_id}/inputs", summary="The MCP servers' questions the session's turn waits on"
)
async def pending_inputs(
    session: OwnedSessionDep, db: DbDep, tenant: TenantDep
) -> list[InputRequestPublic]:
    rows = await list_pending(db, tenant_id=tenant, session_id=session.id, kind="input")
    return [
        InputRequestPublic(
            waitId=row.id,
            toolCallId=row.tool_call_id,
            toolName=row.tool_name,
            submissionId=row.submission_id,
            round=row.round,
            questions=[InputQuestionPublic(**question.public()) for question in questions_of(row)],
            requestedAt=datetime.fromtimestamp(row.requested_at, UTC),
            expiresAt=datetime.fromtimestamp(row.expires_at, UTC),
        )
        for row in rows
    ]


@router.post(
    "/{session_id}/inputs/{wait_id}",
    summary="Answer an MCP server's questions (accept, decline or cancel); the call goes on",
)
@body_limit(message_bytes)
async def answer_input(
    answer: InputAnswerBody,
    session: OwnedSessionDep,
    wait_id: WaitIdPath,
    db: DbDep,
    client: TemporalDep,
    tenant: TenantDep,
) -> WaitAnswerResult:
    """One answer per question, keyed as asked; an accepted form's content must match its
    schema (a 422 says what does not). As for approvals: a repeat is idempotent, a different
    second answer, or one after the wait expired or its turn ended, is a 409."""
    checked = await checked_input_answer(
        db, tenant_id=tenant, session_id=session.id, wait_id=wait_id, body=answer
    )
    (done,) = await record_answers(db, client, tenant, session.id, [checked])
    return _result(done.row, done.changed)
