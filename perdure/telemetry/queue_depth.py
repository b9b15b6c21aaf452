"""`perdure_queue_depth`: read from the store when a gateway is scraped, at bounded cost.

One grouped count of the pending submissions, joined to their session's agent and the
concurrency strategy its workers recorded (`served_agents`), at most once every
`MAX_AGE` seconds however often `/metrics` is scraped, and given up after `READ_TIMEOUT`
(the metric is then left out of that scrape rather than shown stale).
"""

import asyncio
import logging
import time

from sqlalchemy import and_, func
from sqlmodel import col, select

from perdure.telemetry.metrics import QUEUE_DEPTH, QueueDepth
from storage.db import Database
from storage.schedule_tables import ServedAgentRow
from storage.tables import ChatSessionRow, SubmissionRow

log = logging.getLogger("perdure.telemetry")

MAX_AGE = 5.0
"""Seconds a read serves scrapes before the next one reads the store again."""
READ_TIMEOUT = 2.0

_failing = False


async def pending_by_strategy(db: Database, *, task_queue: str) -> dict[str, int]:
    """Pending submissions (not cancelled) by their session agent's concurrency strategy on
    `task_queue` (`queue` for an agent no worker recorded)."""
    strategy = func.coalesce(col(ServedAgentRow.concurrency), "queue")
    statement = (
        select(strategy, func.count())
        .select_from(SubmissionRow)
        .join(ChatSessionRow, col(ChatSessionRow.id) == col(SubmissionRow.session_id))
        .outerjoin(
            ServedAgentRow,
            and_(
                col(ServedAgentRow.task_queue) == task_queue,
                col(ServedAgentRow.name) == col(ChatSessionRow.agent),
            ),
        )
        .where(
            col(SubmissionRow.status) == "pending",
            col(SubmissionRow.cancel_requested_at).is_(None),
        )
        .group_by(strategy)
    )
    async with db.read() as session:
        rows = (await session.exec(statement)).all()
    return {str(name): int(count) for name, count in rows}


async def refresh(db: Database, *, task_queue: str, gauge: QueueDepth = QUEUE_DEPTH) -> None:
    """Bring `gauge` up to date unless it was read less than `MAX_AGE` ago. Never raises: a
    failed or slow read is logged once (until a read succeeds) and the metric left out."""
    global _failing
    if gauge.snapshot is not None and time.monotonic() - gauge.read_at < MAX_AGE:
        return
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            counts = await pending_by_strategy(db, task_queue=task_queue)
    except Exception as error:  # noqa: BLE001 - metrics never fail a scrape or a turn
        gauge.update(None)
        if not _failing:
            _failing = True
            log.warning("reading the queue depth for /metrics failed (%r); left out", error)
        return
    _failing = False
    gauge.update(counts)
