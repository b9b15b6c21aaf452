"""The AI SDK endpoints: send (POST /api/chat), resume, stop, and history."""

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError

from domain.reducer import reduce_chunks
from domain.ui import UIMessage
from gateway.body import read_json
from gateway.deps import OwnedSessionDep, ServicesDep, TenantDep
from gateway.errors import ApiError
from gateway.schemas import ChatRequest, StopResult
from gateway.sse import stream_response
from runtime.services import Services
from storage.chunks import load_log
from storage.messages import active_path
from storage.submissions import ACTIVE, stream_target, submit
from storage.tables import Submission
from turn_control.client import cancel_turn, start_turn

router = APIRouter(prefix="/api/chat", tags=["chat"])
BODY_LIMIT_FACTOR = 16
"""The body carries the client's whole history; only the new message is capped tightly."""


def _stream(services: Services, submission: Submission, after: int) -> Response:
    return stream_response(
        services.db,
        services.bus,
        message_id=submission.assistant_message_id,
        after=after,
        poll_interval=services.settings.poll_interval,
        submission_id=submission.id,
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
    size = len(message.model_dump_json().encode())
    if size > limit:
        raise ApiError(
            413, "message_too_large", f"the message is {size} bytes; the limit is {limit}"
        )
    if not any(p.type in ("text", "file") for p in message.parts):
        raise ApiError(422, "empty_message", "the message has no text or file part")
    return message


@router.post("", summary="Send a message and stream the answer")
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
        await start_turn(
            services.client,
            submission,
            task_queue=services.settings.task_queue,
            eager=services.eager_start,
        )
    return _stream(services, submission, after=-1)


def _cursor(last_event_id: str | None, after: int | None) -> int | None:
    if after is not None:
        return after
    if last_event_id is None:
        return None
    try:
        return max(int(last_event_id), -1)
    except ValueError:
        raise ApiError(400, "bad_cursor", "Last-Event-ID must be an integer seq") from None


@router.get("/{session_id}/stream", summary="Resume the active answer's stream")
async def resume_stream(
    session: OwnedSessionDep,
    services: ServicesDep,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
    after: Annotated[int | None, Query(ge=-1)] = None,
) -> Response:
    session_id = session.id
    cursor = _cursor(last_event_id, after)
    target = await stream_target(services.db, session_id=session_id, latest=cursor is not None)
    if target is None:
        return Response(status_code=204)
    return _stream(services, target, after=-1 if cursor is None else cursor)


@router.post("/{session_id}/stop", summary="Cancel the running turn; its partial answer is kept")
async def stop(session: OwnedSessionDep, services: ServicesDep) -> StopResult:
    if session.running_submission_id is None:
        return StopResult(success=True, submissionId=None)
    await cancel_turn(services.client, session.running_submission_id)
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
