"""The AI SDK endpoints: send (POST /api/chat), resume, stop, and history."""

import logging
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from temporalio.client import Client

from gateway.access import tenant_limits
from gateway.body_limits import body_limit, history_bytes
from gateway.client_answers import answers_in, continuation_cursor
from gateway.deps import (
    DbDep,
    LifecycleDep,
    OwnedSessionDep,
    SettingsDep,
    TemporalDep,
    TenantDep,
    WatcherDep,
)
from gateway.errors import ApiError
from gateway.intake import check_encoding, checked_user_message
from gateway.schemas.chat import ChatRequest, DropSteeringQuery, StopResult
from gateway.schemas.submissions import SUBMISSION_ID_PATTERN
from gateway.sse import MAX_SEQ, Cursor, cursor_from, stream_response
from gateway.stop_answers import answered_status
from gateway.waits import record_answers
from perdure.domain.reducer import reduce_chunks
from perdure.domain.ui import UIMessage
from perdure.runtime.settings import Settings
from perdure.telemetry.log_context import bind_ids
from storage.chunks import load_log
from storage.db import Database
from storage.intake import NewSubmission
from storage.log_watch import LogWatcher
from storage.messages import active_path, stored_message
from storage.submission_options import SubmissionOptions
from storage.submission_reads import stream_target, submission_of_answer
from storage.tables import SubmissionRow
from storage.tool_waits import client_calls_of

log = logging.getLogger("perdure.gateway")

router = APIRouter(prefix="/api/chat", tags=["chat"])
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: a UI message chunk as JSON, or `[DONE]` last.",
    "properties": {
        "id": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_\-]{1,64}:\d+$",
            "description": "`<submission id>:<seq>`: send it back as `Last-Event-ID`",
        },
        "data": {"type": "string"},
        "event": {"type": "string"},
    },
    "required": ["data"],
}
STREAM_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer as an AI SDK UI message stream (server-sent events)",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}


async def _stream(
    db: Database,
    watcher: LogWatcher,
    settings: Settings,
    submission: SubmissionRow,
    cursor: Cursor | None,
    accepted_at: float | None = None,
) -> Response:
    response = await stream_response(
        db,
        watcher,
        message_id=submission.assistant_message_id,
        submission_id=submission.id,
        cursor=cursor,
        accepted_at=accepted_at,
    )
    response.headers["x-perdure-temporal-url"] = settings.turn_ui_url(submission.id)
    return response


def _checked_message(chat: ChatRequest, limit: int) -> UIMessage:
    message = chat.new_message()
    if chat.trigger == "regenerate-message" and message.role != "user":
        raise ApiError(
            422,
            "invalid_request",
            "regenerate-message: the messages must end with the user message to answer again",
        )
    if message.role == "system":
        raise ApiError(
            422,
            "unsupported_message",
            "the last message must be a user message, or the assistant message that answers "
            "its approvals or client tool calls",
        )
    if message.role == "assistant":
        check_encoding(message, limit)
        return message
    return checked_user_message(message, limit)


@router.post(
    "",
    summary="Send a message and stream the answer",
    response_class=Response,
    responses=STREAM_RESPONSE,
)
@body_limit(history_bytes)
async def send_message(
    chat: ChatRequest,
    db: DbDep,
    client: TemporalDep,
    watcher: WatcherDep,
    settings: SettingsDep,
    lifecycle: LifecycleDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(max_length=300)] = None,
) -> Response:
    accepted_at = time.monotonic()  # the time-to-first-token metric counts from the parsed body
    bind_ids(tenant_id=tenant)
    message = _checked_message(chat, settings.max_message_bytes)
    if message.role == "assistant":
        continued, cursor = await _continued(db, client, tenant, chat, message)
        return await _stream(db, watcher, settings, continued, cursor)
    checked = await tenant_limits(db, settings, tenant, chat.agent)
    edit_of = await _edited(db, tenant, chat, message)
    if edit_of is not None:
        # The edit is stored beside the message it edits, under an id of its own.
        message = message.model_copy(update={"id": f"{edit_of}.edit-{uuid.uuid4().hex[:8]}"})
    outcome = await lifecycle.submit(
        NewSubmission(
            tenant_id=tenant,
            chat_id=chat.id,
            agent=chat.agent or settings.default_agent,
            message=message,
            idempotency_key=idempotency_key or _default_key(chat, message),
            options=SubmissionOptions(
                client_tools=[tool.model_dump() for tool in chat.tools] if chat.tools else None,
                concurrency=chat.concurrency,
                debounce_ms=chat.debounceMs,
                task_queue=settings.task_queue,
                regenerate=chat.trigger == "regenerate-message",
                edit_of=edit_of,
                limits=checked,
            ),
        )
    )
    bind_ids(session_id=outcome.submission.session_id, submission_id=outcome.submission.id)
    log.info("message submitted (%s)", "new" if outcome.created else "already submitted")
    return await _stream(
        db,
        watcher,
        settings,
        outcome.submission,
        cursor=None,
        accepted_at=accepted_at if outcome.created else None,
    )


async def _edited(db: Database, tenant: str, chat: ChatRequest, message: UIMessage) -> str | None:
    """The stored user message this one edits: the AI SDK sends an edit with `messageId` set
    to the edited message's id, which the new message keeps."""
    if chat.trigger != "submit-message" or chat.messageId is None or chat.messageId != message.id:
        return None
    stored = await stored_message(db, tenant_id=tenant, chat_id=chat.id, message_id=message.id)
    return message.id if stored is not None and stored.role == "user" else None


def _default_key(chat: ChatRequest, message: UIMessage) -> str:
    """A new message is deduplicated by its id; each regenerate is a new answer (a branch)."""
    if chat.trigger == "regenerate-message" or chat.messageId is not None:
        return f"{chat.trigger}:{message.id}:{uuid.uuid4().hex}"
    return f"message:{message.id}"


async def _continued(
    db: Database, client: Client, tenant: str, chat: ChatRequest, message: UIMessage
) -> tuple[SubmissionRow, Cursor | None]:
    """The AI SDK's continuation after approvals or client tool outputs (gateway/client_answers):
    the answers recorded, the turn to stream on and where."""
    if chat.messageId is not None and chat.messageId != message.id:
        raise ApiError(
            422, "invalid_request", "messageId must be the id of the assistant message sent"
        )
    submission = await submission_of_answer(
        db, tenant_id=tenant, chat_id=chat.id, message_id=message.id
    )
    if submission is None:
        raise ApiError(
            404,
            "message_not_found",
            f"no answer {message.id!r} in session {chat.id!r} to continue",
        )
    client_calls = await client_calls_of(db, submission_id=submission.id)
    answers = answers_in(message, client_calls)
    if not answers:
        raise ApiError(
            422,
            "nothing_to_continue",
            "the assistant message answers no approval or client tool call; send a user "
            "message to go on",
        )
    answered = await record_answers(db, client, tenant, submission.session_id, answers)
    return submission, await continuation_cursor(db, submission, [a.row for a in answered])


@router.get(
    "/{session_id}/stream",
    summary="Resume the active answer's stream",
    response_class=Response,
    responses={**STREAM_RESPONSE, 204: {"description": "Nothing is active to resume"}},
)
async def resume_stream(
    session: OwnedSessionDep,
    db: DbDep,
    watcher: WatcherDep,
    settings: SettingsDep,
    last_event_id: Annotated[
        str | None,
        Header(
            max_length=100,
            description="The id of the last event seen: `<submission id>:<seq>`, or a seq",
        ),
    ] = None,
    after: Annotated[
        int | None, Query(ge=-1, le=MAX_SEQ, description="Resume after this seq")
    ] = None,
) -> Response:
    session_id = session.id
    cursor = cursor_from(last_event_id, after)
    target = await stream_target(db, session_id=session_id, latest=cursor is not None)
    if target is None:
        return Response(status_code=204)
    return await _stream(db, watcher, settings, target, cursor)


@router.post(
    "/{session_id}/stop",
    summary="Stop the running turn; its partial answer is kept",
)
async def stop(
    session: OwnedSessionDep,
    lifecycle: LifecycleDep,
    submission_id: Annotated[
        str | None,
        Query(
            alias="submissionId",
            pattern=SUBMISSION_ID_PATTERN,
            description="Stop this submission (the id in the stream's event ids); without it, "
            "the running turn, else the oldest queued one",
        ),
    ] = None,
    drop_steering: DropSteeringQuery = False,
) -> StopResult:
    """The stop is recorded in the store before this answers, so it holds whatever happens
    next (a worker dying, a recovery, a gateway restart): a `stopped` turn's stream always
    ends with `abort`."""
    record = await lifecycle.stop(
        session_id=session.id, submission_id=submission_id, drop_steering=drop_steering
    )
    if submission_id is not None and record.submission is None:
        raise ApiError(
            404,
            "submission_not_found",
            f"no submission {submission_id!r} in session {session.chat_id!r}",
        )
    return StopResult(
        result=record.verdict,
        submissionId=record.submission.id if record.submission else None,
        status=answered_status(record),
    )


@router.get("/{session_id}/messages", summary="The active path as AI SDK UIMessages")
async def messages(
    session: OwnedSessionDep,
    db: DbDep,
    limit: Annotated[
        int | None,
        Query(ge=1, le=10_000, description="Only the newest this many stored messages"),
    ] = None,
) -> list[UIMessage]:
    session_id = session.id
    # The running turn first: if it ends between the two reads, the path read after it holds
    # its stored answer. Read the other way round, that answer would be in neither.
    running = await stream_target(db, session_id=session_id, latest=False)
    path = await active_path(db, session_id=session_id, newest=limit)
    stored_ids = {message.id for message in path}
    if (
        running is not None
        and running.status == "running"
        and running.assistant_message_id not in stored_ids
    ):
        partial = reduce_chunks(await load_log(db, message_id=running.assistant_message_id))
        if partial.parts:
            path.append(
                UIMessage.model_validate(
                    {
                        "id": running.assistant_message_id,
                        "role": "assistant",
                        "parts": partial.parts,
                        "metadata": {
                            **partial.metadata,
                            "status": "waiting" if partial.parked else "streaming",
                        },
                    }
                )
            )
    return path
