"""Record answers to a parked turn's waits and tell the turn: shared by the AI SDK
continuation and the REST endpoints."""

from temporalio.client import Client

from gateway.errors import ApiError
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from perdure.turn_control.client import signal_answered
from storage.db import Database
from storage.tool_waits import Answered, WaitAnswer, WaitConflict, WaitNotFound, answer_waits


async def record_answers(
    db: Database, client: Client, tenant: str, session_id: str, answers: list[WaitAnswer]
) -> list[Answered]:
    """All or none; then signal the turn. A repeated answer signals again, so a client that
    retries after a lost signal (a 503) still wakes the turn; the turn ignores repeats."""
    try:
        answered = await answer_waits(db, tenant_id=tenant, session_id=session_id, answers=answers)
    except WaitNotFound as error:
        raise ApiError(404, "wait_not_found", str(error)) from None
    except WaitConflict as error:
        raise ApiError(409, "wait_conflict", str(error)) from None
    by_turn: dict[str, list[str]] = {}
    for item in answered:
        by_turn.setdefault(item.row.submission_id, []).append(item.row.id)
    for submission_id, wait_ids in by_turn.items():
        await temporal_call(
            signal_answered(client, submission_id, wait_ids),
            within=TEMPORAL_TIMEOUT_SECONDS,
            client=client,
        )
    return answered
