"""Durable submissions (Think's programmatic submissions): accepted before any inference,
inspected, listed, cancelled and deleted; each one's stream readable by its id."""

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Response

from gateway.access import tenant_limits
from gateway.body_limits import body_limit, history_bytes
from gateway.deps import (
    DbDep,
    LifecycleDep,
    OwnedSessionDep,
    SessionIdPath,
    SettingsDep,
    TemporalDep,
    TenantDep,
    WatcherDep,
)
from gateway.errors import ApiError
from gateway.intake import checked_user_message
from gateway.schemas.chat import DropSteeringQuery
from gateway.schemas.submissions import (
    SUBMISSION_ID_PATTERN,
    ClearResult,
    SubmissionAccepted,
    SubmissionCreate,
    SubmissionPublic,
    SubmissionsDeleted,
    SubmissionsPublic,
    SubmissionStatus,
)
from gateway.sse import MAX_SEQ, cursor_from, stream_response
from gateway.stop_answers import answered_status
from perdure.domain.ui import UIMessage
from perdure.runtime.settings import Settings
from perdure.turn_control.client import wait_turn_ended
from storage.db import Database
from storage.intake import NewSubmission
from storage.submission_ledger import (
    ENDED,
    clear_session,
    delete_ended,
    list_submissions,
    owned_submission,
)
from storage.submission_options import SubmissionOptions
from storage.submission_reads import get_submission
from storage.tables import ChatSessionRow, SubmissionRow

router = APIRouter(prefix="/v1/sessions", tags=["submissions"])

SubmissionIdPath = Annotated[str, Path(pattern=SUBMISSION_ID_PATTERN)]
DELETE_BATCH = 1000


async def _owned(db: Database, tenant: str, session: ChatSessionRow, sid: str) -> SubmissionRow:
    row = await owned_submission(db, tenant_id=tenant, session_id=session.id, submission_id=sid)
    if row is None:
        raise ApiError(
            404, "submission_not_found", f"no submission {sid!r} in session {session.chat_id!r}"
        )
    return row


def _public(settings: Settings, row: SubmissionRow, chat_id: str) -> SubmissionPublic:
    return SubmissionPublic.of(row, chat_id=chat_id, temporal_url=settings.turn_ui_url(row.id))


@router.post(
    "/{session_id}/submissions",
    status_code=202,
    summary="Submit messages for a turn; answers at once, before any inference",
    responses={200: {"model": SubmissionAccepted, "description": "With `wait`: it has ended"}},
)
@body_limit(history_bytes)
async def create(
    body: SubmissionCreate,
    response: Response,
    session_id: SessionIdPath,
    db: DbDep,
    client: TemporalDep,
    settings: SettingsDep,
    lifecycle: LifecycleDep,
    tenant: TenantDep,
) -> SubmissionAccepted:
    """The same `idempotencyKey` (or `submissionId`) returns the same submission with
    `accepted: false`; an id and a key that name different submissions are a 409. Its
    messages join the session's transcript only when its turn starts (FIFO)."""
    limit = settings.max_message_bytes
    messages = [checked_user_message(message, limit) for message in body.messages] or [
        UIMessage(id="continue", role="user")  # stands for the last answer, taken from the store
    ]
    key = body.idempotencyKey or (
        f"submission:{body.submissionId}" if body.submissionId else f"api:{uuid.uuid4().hex}"
    )
    outcome = await lifecycle.submit(
        NewSubmission(
            tenant_id=tenant,
            chat_id=session_id,
            agent=body.agent or settings.default_agent,
            message=messages[-1],
            idempotency_key=key,
            options=SubmissionOptions(
                prior_messages=messages[:-1],
                submission_id=body.submissionId,
                metadata=body.metadata,
                concurrency=body.concurrency,
                debounce_ms=body.debounceMs,
                task_queue=settings.task_queue,
                continue_last=body.continueLastTurn,
                limits=await tenant_limits(db, settings, tenant, body.agent),
            ),
        )
    )
    row = outcome.submission
    if body.wait and row.status not in ENDED:
        await wait_turn_ended(client, row.id, grace_seconds=body.waitSeconds)
        row = await get_submission(db, row.id) or row
    if row.status in ENDED:
        response.status_code = 200
    return SubmissionAccepted(
        **_public(settings, row, session_id).model_dump(), accepted=outcome.created
    )


@router.get("/{session_id}/submissions", summary="The session's submissions, in queue order")
async def list_all(
    session: OwnedSessionDep,
    db: DbDep,
    settings: SettingsDep,
    tenant: TenantDep,
    status: Annotated[list[SubmissionStatus] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> SubmissionsPublic:
    rows, total = await list_submissions(
        db,
        tenant_id=tenant,
        session_id=session.id,
        statuses=list(status) if status else None,
        limit=limit,
        offset=offset,
    )
    return SubmissionsPublic(
        data=[_public(settings, row, session.chat_id) for row in rows], count=total
    )


@router.get("/{session_id}/submissions/{submission_id}", summary="One submission")
async def read(
    session: OwnedSessionDep,
    submission_id: SubmissionIdPath,
    db: DbDep,
    settings: SettingsDep,
    tenant: TenantDep,
) -> SubmissionPublic:
    row = await _owned(db, tenant, session, submission_id)
    return _public(settings, row, session.chat_id)


@router.post(
    "/{session_id}/submissions/{submission_id}/cancel",
    summary="Cancel a submission: a queued one never runs, a running one stops",
    responses={409: {"description": "It ended before the cancel (its status says how)"}},
)
async def cancel(
    session: OwnedSessionDep,
    submission_id: SubmissionIdPath,
    settings: SettingsDep,
    lifecycle: LifecycleDep,
    drop_steering: DropSteeringQuery = False,
) -> SubmissionPublic:
    """The same stop as `POST /api/chat/{id}/stop?submissionId=`: recorded in the store, then
    the turn's workflow is cancelled through Temporal, so it holds whichever gateway or worker
    is up. A cancel recorded before the turn's ending is decided wins (it ends `aborted`); a
    turn that had ended, or was ending, keeps its status: `409`. Cancelling again is a 200."""
    record = await lifecycle.stop(
        session_id=session.id, submission_id=submission_id, drop_steering=drop_steering
    )
    row = record.submission
    if row is None:
        raise ApiError(
            404,
            "submission_not_found",
            f"no submission {submission_id!r} in session {session.chat_id!r}",
        )
    if record.verdict == "already_finished" and row.cancel_requested_at is None:
        raise ApiError(
            409,
            "submission_ended",
            f"submission {row.id!r} has already ended ({answered_status(record)})",
        )
    return _public(settings, row, session.chat_id)


@router.delete(
    "/{session_id}/submissions",
    summary="Delete ended submissions (their chunk logs go too; stored messages stay)",
)
async def delete_old(
    session: OwnedSessionDep,
    db: DbDep,
    tenant: TenantDep,
    completedBefore: Annotated[datetime, Query()],  # noqa: N803 - wire name
) -> SubmissionsDeleted:
    deleted = await delete_ended(
        db,
        tenant_id=tenant,
        session_id=session.id,
        completed_before=completedBefore.timestamp(),
        limit=DELETE_BATCH,
    )
    return SubmissionsDeleted(deleted=deleted)


@router.get(
    "/{session_id}/submissions/{submission_id}/stream",
    summary="The submission's answer as a UI message stream",
    response_class=Response,
)
async def stream(
    session: OwnedSessionDep,
    submission_id: SubmissionIdPath,
    db: DbDep,
    watcher: WatcherDep,
    tenant: TenantDep,
    last_event_id: Annotated[str | None, Header(max_length=100)] = None,
    after: Annotated[int | None, Query(ge=-1, le=MAX_SEQ)] = None,
) -> Response:
    """As the chat resume (`Last-Event-ID` or `?after=`), for this submission only: a queued
    one's stream waits for its turn, an ended one replays and ends."""
    row = await _owned(db, tenant, session, submission_id)
    return await stream_response(
        db,
        watcher,
        message_id=row.assistant_message_id,
        submission_id=row.id,
        cursor=cursor_from(last_event_id, after),
    )


@router.post(
    "/{session_id}/clear",
    summary="Start the conversation afresh: stop the running turn, skip the queued ones",
)
async def clear(
    session: OwnedSessionDep, db: DbDep, lifecycle: LifecycleDep, tenant: TenantDep
) -> ClearResult:
    """The active path becomes empty (earlier messages stay in the session's tree, off the
    path); the running turn is stopped (its partial is kept, off the path too); each queued
    submission ends `skipped` without running."""
    skipped = await clear_session(db, tenant_id=tenant, session_id=session.id)
    if session.running_submission_id is not None:
        await lifecycle.stop(session_id=session.id, submission_id=session.running_submission_id)
    await lifecycle.skip(skipped)
    return ClearResult(
        stoppedSubmissionId=session.running_submission_id,
        skippedSubmissionIds=[row.id for row in skipped],
    )
