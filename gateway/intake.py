"""Taking a submission in: check the user messages, record them, start the turn (or undo)."""

import asyncio
import logging

from pydantic_core import PydanticSerializationError

from domain.names import ADMIT_SIGNAL, SKIP_SIGNAL
from domain.ui import UIMessage
from gateway.errors import ApiError
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from runtime.services import Services
from storage.submissions import ACTIVE, SubmitOutcome, withdraw_submission
from storage.tables import Submission
from turn_control.client import cancel_turn, signal_turn, start_turn

log = logging.getLogger("perdure.gateway")


def checked_user_message(message: UIMessage, limit: int) -> UIMessage:
    """A user message with a text or file part, valid Unicode, without NUL, within `limit`."""
    if message.role != "user":
        raise ApiError(422, "unsupported_message", f"message {message.id!r} is not a user message")
    check_encoding(message, limit)
    for index, part in enumerate(message.parts):
        if part.type == "text" and not isinstance(part.field("text"), str):
            raise ApiError(
                422, "invalid_request", f"parts.{index}.text: a text part needs a string `text`"
            )
    if not any(p.type in ("text", "file") for p in message.parts):
        raise ApiError(422, "empty_message", "the message has no text or file part")
    return message


def check_encoding(message: UIMessage, limit: int) -> None:
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


_background: set[asyncio.Task[None]] = set()


async def _admit_next(services: Services, submission: Submission, chat_id: str) -> None:
    try:
        await temporal_call(
            signal_turn(
                services.client,
                submission,
                chat_id=chat_id,
                task_queue=services.settings.task_queue,
                signal=ADMIT_SIGNAL,
            ),
            within=10 * TEMPORAL_TIMEOUT_SECONDS,
        )
    except Exception as error:  # noqa: BLE001 - best effort: logged, never raised
        log.warning("could not admit submission %s: %s", submission.id, error)


async def _withdraw(services: Services, submission: Submission, chat_id: str) -> None:
    """Undo an intake whose turn could not be started: nothing stays half-written."""
    try:
        withdrawal = await withdraw_submission(services.db, submission_id=submission.id)
    except Exception:  # the store failed too: the reconciler will start the turn later
        log.exception("could not withdraw submission %s", submission.id)
        return
    if withdrawal.admitted is not None:
        task = asyncio.create_task(_admit_next(services, withdrawal.admitted, chat_id))
        _background.add(task)
        task.add_done_callback(_background.discard)


async def start_submitted(services: Services, outcome: SubmitOutcome, *, chat_id: str) -> None:
    """Start the submission's turn (idempotent) in the session the client calls `chat_id`.
    If Temporal cannot be reached, a submission this request created is withdrawn: nothing
    stays half-written."""
    submission = outcome.submission
    if submission.status not in ACTIVE:
        await _apply_effects(services, outcome, chat_id)
        return
    try:
        await temporal_call(
            start_turn(
                services.client,
                submission,
                chat_id=chat_id,
                task_queue=services.settings.task_queue,
                eager=services.eager_start,
            ),
            within=TEMPORAL_TIMEOUT_SECONDS,
            client=services.client,
        )
    except Exception:
        if outcome.created:  # a repeated request leaves the original's turn alone
            await _withdraw(services, submission, chat_id)
        raise
    await _apply_effects(services, outcome, chat_id)


async def _apply_effects(services: Services, outcome: SubmitOutcome, chat_id: str) -> None:
    """What the session's concurrency strategy asked: stop the running turn, skip queued
    ones. Both are recorded in the store already (a marked submission is never admitted), so
    a failure here leaves a turn running to its end, never a wrong one started."""
    calls = [
        cancel_turn(services.client, submission_id) for submission_id in outcome.effects.cancel
    ]
    calls += [
        signal_turn(
            services.client,
            row,
            chat_id=chat_id,
            task_queue=services.settings.task_queue,
            signal=SKIP_SIGNAL,
        )
        for row in outcome.effects.skip
    ]
    for call in calls:
        try:
            await temporal_call(call, within=TEMPORAL_TIMEOUT_SECONDS, client=services.client)
        except Exception as error:  # noqa: BLE001 - logged; the submission itself is taken
            log.warning("concurrency strategy: %s", error)
