"""A continuation: the AI SDK posts the assistant message back with approvals or tool outputs.

After `addToolApprovalResponse` or `addToolOutput`, `useChat` sends the same assistant message
(`trigger: submit-message`, `messageId` = its id) with the answered parts. Every answer is
checked against the store's pending waits of that message's turn — tenant, session, id, still
unanswered — and recorded all or none; then the turn is told which waits have answers, and the
client gets the same message's continuation: `start` with its id, event ids rising on.
"""

from typing import Any

from gateway.errors import ApiError
from gateway.schemas.waits import MAX_REASON_CHARS
from gateway.sse import Cursor, is_park
from perdure.domain.ui import Chunk, UIMessage
from storage.chunks import load_log
from storage.db import Database
from storage.tables import SubmissionRow, ToolWaitRow
from storage.tool_waits import WaitAnswer


def _text(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_REASON_CHARS:
        raise ApiError(
            422, "invalid_request", f"{field} must be text of at most {MAX_REASON_CHARS} chars"
        )
    return value


def approval_answer(part: dict[str, Any]) -> WaitAnswer:
    approval = part.get("approval")
    if not isinstance(approval, dict) or not isinstance(approval.get("id"), str):
        raise ApiError(
            422, "invalid_request", "an approval-responded part needs `approval.id` (text)"
        )
    if not isinstance(approval.get("approved"), bool):
        raise ApiError(
            422, "invalid_request", f"approval {approval['id']}: `approved` must be true or false"
        )
    return WaitAnswer(
        kind="approval",
        key=approval["id"],
        approved=approval["approved"],
        reason=_text(approval.get("reason"), "approval.reason"),
    )


def output_answer(part: dict[str, Any]) -> WaitAnswer:
    call_id = str(part["toolCallId"])
    if part.get("state") == "output-error":
        error = _text(part.get("errorText"), "errorText") or "The client tool failed."
        return WaitAnswer(kind="client", key=call_id, error_text=error)
    return WaitAnswer(kind="client", key=call_id, output=part.get("output"))


def answers_in(message: UIMessage, client_calls: set[str]) -> list[WaitAnswer]:
    """The answers the message carries: every `approval-responded` part, and the output of
    each call in `client_calls` (the turn's client tool calls; other outputs in the message
    are the server's own results, echoed back by the client)."""
    answers: list[WaitAnswer] = []
    for model in message.parts:
        part = model.model_dump()
        state = part.get("state")
        if not isinstance(part.get("toolCallId"), str):
            continue
        if state == "approval-responded":
            answers.append(approval_answer(part))
        elif state in ("output-available", "output-error") and part["toolCallId"] in client_calls:
            answers.append(output_answer(part))
    return answers


def park_cursor(
    submission: SubmissionRow, logged: list[Chunk], rows: list[ToolWaitRow]
) -> Cursor | None:
    """Where the continuation of `rows` begins: after the first park following the earliest
    of their requests (approval request, or the client call's input)."""
    wanted = {row.tool_call_id: row.kind for row in rows}
    first_request: int | None = None
    for seq, chunk in enumerate(logged):
        call_id = chunk.get("toolCallId")
        kind = wanted.get(call_id) if isinstance(call_id, str) else None
        is_request = (kind == "approval" and chunk["type"] == "tool-approval-request") or (
            kind == "client" and chunk["type"] == "tool-input-available"
        )
        if first_request is None and is_request:
            first_request = seq
        if first_request is not None and is_park(chunk):
            return Cursor(seq=seq, submission_id=submission.id)
    return None


async def continuation_cursor(
    db: Database, submission: SubmissionRow, rows: list[ToolWaitRow]
) -> Cursor:
    logged = await load_log(db, message_id=submission.assistant_message_id)
    cursor = park_cursor(submission, logged, rows)
    if cursor is None:  # not parked on these calls: the whole answer, from its start
        return Cursor(seq=-1, submission_id=submission.id)
    return cursor
