"""Stopping a turn, for every route that stops one: record the stop, then cancel through
Temporal (storage/stops.py says why the record comes first)."""

import logging

from gateway.errors import ApiError
from gateway.temporal import TEMPORAL_TIMEOUT_SECONDS, temporal_call
from runtime.services import Services
from storage.stops import StopRecord, record_stop
from turn_control.client import cancel_turn

log = logging.getLogger("perdure.gateway")


async def stop_turn(
    services: Services, *, session_id: str, submission_id: str | None = None
) -> StopRecord:
    """Stop the submission (or the session's running turn). Once the stop is recorded it
    holds: when Temporal cannot take the cancellation now, the turn stops at its next step and
    the reconciler sends the cancellation again, so the answer is still `stopped`."""
    record = await record_stop(services.db, session_id=session_id, submission_id=submission_id)
    if record.verdict != "stopped" or record.submission is None:
        return record
    try:
        await temporal_call(
            cancel_turn(services.client, record.submission.id),
            within=TEMPORAL_TIMEOUT_SECONDS,
            client=services.client,
        )
    except ApiError as error:
        log.warning(
            "stop of %s recorded; Temporal did not take the cancellation (%s): the turn stops "
            "at its next step",
            record.submission.id,
            error.message,
        )
    return record
