"""Observability events: stored per session (GET /v1/sessions/{id}/events) and logged."""

import logging
from typing import Any

from storage.db import Database
from storage.events import add_event

log = logging.getLogger("perdure.events")


async def emit(
    db: Database, *, session_id: str, submission_id: str, type: str, **data: Any
) -> None:
    log.info("%s session=%s submission=%s %s", type, session_id, submission_id, data)
    await add_event(db, session_id=session_id, submission_id=submission_id, type=type, data=data)
