"""Per-session observability events (recovery, repairs, submission status)."""

from typing import Any

from sqlmodel import col, select

from storage.db import Database
from storage.tables import EventRow
from storage.timing import now


async def add_event(
    db: Database,
    *,
    session_id: str,
    type: str,
    data: dict[str, Any],
    submission_id: str | None = None,
) -> None:
    async with db.write() as session:
        session.add(
            EventRow(
                session_id=session_id,
                submission_id=submission_id,
                type=type,
                data=data,
                created_at=now(),
            )
        )


async def list_events(
    db: Database, *, session_id: str, after_id: int = 0, limit: int = 200
) -> list[EventRow]:
    async with db.read() as session:
        rows = await session.exec(
            select(EventRow)
            .where(EventRow.session_id == session_id, col(EventRow.id) > after_id)
            .order_by(col(EventRow.id))
            .limit(limit)
        )
        return list(rows.all())
