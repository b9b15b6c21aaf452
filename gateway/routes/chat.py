"""The AI SDK endpoints: send (POST /api/chat), resume, stop, and history."""

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from domain.names import ADMIT_SIGNAL
from domain.reducer import reduce_chunks
from domain.ui import UIMessage
from gateway.body import read_json
from gateway.deps import OwnedSessionDep, ServicesDep, TenantDep
from gateway.errors import ApiError
from gateway.schemas import CHAT_REQUEST_BODY, ChatRequest, StopResult
from gateway.sse import MAX_SEQ, Cursor, stream_response
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from runtime.services import Services
from storage.chunks import load_log
from storage.messages import active_path
from storage.submissions import ACTIVE, stream_target, submit, withdraw_submission
from storage.tables import Submission
from turn_control.client import cancel_turn, signal_turn, start_turn

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
BODY_LIMIT_FACTOR = 16
"""The body carries the client's whole history; only the new message is capped tightly."""


async def _stream(services: Services, submission: Submission, cursor: Cursor | None) -> Response:
    return await stream_response(
        services.db,
        services.watcher,
        message_id=submission.assistant_message_id,
        submission_id=submission.id,
        cursor=cursor,
    )


def _parse_chat_request(payload: object) -> ChatRequest:
    try:
        return ChatRequest.model_validate(payload)
    except ValidationError as error:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in error.errors(include_url=False)
        ]
        summary = "; ".join(f"{p['field'] or 'body'}: {p['message']}" for p in problems[:5])
        raise ApiError(422, "invalid_request", summary, problems=problems) from error


def _checked_message(chat: ChatRequest, limit: int) -> UIMessage:
    if chat.trigger == "regenerate-message":
        raise ApiError(
            422,
            "unsupported_trigger",
            "regenerate-message is not supported yet; send a new message",
        )
    message = chat.new_message()
    if message.role != "user":
        raise ApiError(
            422,
            "unsupported_message",
            "the last message must be a user message (continuations after tool approval "
            "are not supported yet)",
        )
    try:
        encoded = message.model_dump_json()
    except PydanticSerializationError:
        raise ApiError(
            422, "invalid_request", "the message is not valid Unicode (a lone surrogate)"
        ) from None
    if "\\u0000" in encoded:
        raise ApiError(422, "invalid_request", "the message contains a NUL character")
    size = len(encoded.encode())
    if size > limit:
        raise ApiError(
            413, "message_too_large", f"the message is {size} bytes; the limit is {limit}"
        )
    for index, part in enumerate(message.parts):
        if part.type == "text" and not isinstance(part.field("text"), str):
            raise ApiError(
                422, "invalid_request", f"parts.{index}.text: a text part needs a string `text`"
            )
    if not any(p.type in ("text", "file") for p in message.parts):
        raise ApiError(422, "empty_message", "the message has no text or file part")
    return message


_background: set[asyncio.Task[None]] = set()


async def _admit_next(services: Services, submission: Submission) -> None:
    try:
        await temporal_call(
            signal_turn(
                services.client,
                submission,
                task_queue=services.settings.task_queue,
                signal=ADMIT_SIGNAL,
            ),
            within=10 * TEMPORAL_TIMEOUT_SECONDS,
        )
    except Exception as error:  # noqa: BLE001 - best effort: logged, never raised
        log.warning("could not admit submission %s: %s", submission.id, error)


async def _withdraw(services: Services, submission: Submission) -> None:
    """Undo an intake whose turn could not be started: nothing stays half-written."""
    try:
        withdrawal = await withdraw_submission(services.db, submission_id=submission.id)
    except Exception:  # the store failed too: the reconciler will start the turn later
        log.exception("could not withdraw submission %s", submission.id)
        return
    if withdrawal.admitted is not None:
        task = asyncio.create_task(_admit_next(services, withdrawal.admitted))
        _background.add(task)
        task.add_done_callback(_background.discard)


@router.post(
    "",
    summary="Send a message and stream the answer",
    openapi_extra={"requestBody": CHAT_REQUEST_BODY},
    response_class=Response,
    responses=STREAM_RESPONSE,
)
async def send_message(
    request: Request,
    services: ServicesDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(max_length=300)] = None,
) -> Response:
    limit = services.settings.max_message_bytes
    chat = _parse_chat_request(await read_json(request, limit=limit * BODY_LIMIT_FACTOR))
    message = _checked_message(chat, limit)
    outcome = await submit(
        services.db,
        tenant_id=tenant,
        session_id=chat.id,
        agent=chat.agent or services.settings.default_agent,
        message=message,
        idempotency_key=idempotency_key or f"message:{message.id}",
    )
    submission = outcome.submission
    if submission.status in ACTIVE:
        try:
            await temporal_call(
                start_turn(
                    services.client,
                    submission,
                    task_queue=services.settings.task_queue,
                    eager=services.eager_start,
                ),
                within=TEMPORAL_TIMEOUT_SECONDS,
                client=services.client,
            )
        except Exception:
            if outcome.created:  # a repeated request leaves the original's turn alone
                await _withdraw(services, submission)
            raise
    return await _stream(services, submission, cursor=None)


def _cursor(last_event_id: str | None, after: int | None) -> Cursor | None:
    if after is not None:
        return Cursor(seq=after)
    if last_event_id is None:
        return None
    cursor = Cursor.parse(last_event_id)
    if cursor is None:
        raise ApiError(
            400,
            "bad_cursor",
            f"Last-Event-ID must be an event id (`<submission id>:<seq>`) or a seq "
            f"from -1 to {MAX_SEQ}",
        )
    return cursor


@router.get(
    "/{session_id}/stream",
    summary="Resume the active answer's stream",
    response_class=Response,
    responses={**STREAM_RESPONSE, 204: {"description": "Nothing is active to resume"}},
)
async def resume_stream(
    session: OwnedSessionDep,
    services: ServicesDep,
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
    cursor = _cursor(last_event_id, after)
    target = await stream_target(services.db, session_id=session_id, latest=cursor is not None)
    if target is None:
        return Response(status_code=204)
    return await _stream(services, target, cursor)


@router.post("/{session_id}/stop", summary="Cancel the running turn; its partial answer is kept")
async def stop(session: OwnedSessionDep, services: ServicesDep) -> StopResult:
    if session.running_submission_id is None:
        return StopResult(success=True, submissionId=None)
    await temporal_call(
        cancel_turn(services.client, session.running_submission_id),
        within=TEMPORAL_TIMEOUT_SECONDS,
        client=services.client,
    )
    return StopResult(success=True, submissionId=session.running_submission_id)


@router.get("/{session_id}/messages", summary="The active path as AI SDK UIMessages")
async def messages(session: OwnedSessionDep, services: ServicesDep) -> list[UIMessage]:
    session_id = session.id
    path = await active_path(services.db, session_id=session_id)
    running = await stream_target(services.db, session_id=session_id, latest=False)
    if running is not None and running.status == "running":
        partial = reduce_chunks(
            await load_log(services.db, message_id=running.assistant_message_id)
        )
        if partial.parts:
            path.append(
                UIMessage.model_validate(
                    {
                        "id": running.assistant_message_id,
                        "role": "assistant",
                        "parts": partial.parts,
                        "metadata": {**partial.metadata, "status": "streaming"},
                    }
                )
            )
    return path
