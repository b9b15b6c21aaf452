"""Compaction summaries of a session (overlays for the model; the messages stay whole)."""

import uuid

from sqlmodel import col, select

from storage.db import Database
from storage.tables import CompactionRow
from storage.timing import now


async def session_compactions(db: Database, *, session_id: str) -> list[CompactionRow]:
    statement = (
        select(CompactionRow)
        .where(CompactionRow.session_id == session_id)
        .order_by(col(CompactionRow.created_at))
    )
    return await db.read_sync(lambda session: list(session.exec(statement)))


async def save_compaction(
    db: Database,
    *,
    session_id: str,
    up_to_message_id: str,
    summary: str,
    tokens_before: int,
    tokens_after: int,
) -> CompactionRow:
    row = CompactionRow(
        id=f"cmp_{uuid.uuid4().hex}",
        session_id=session_id,
        up_to_message_id=up_to_message_id,
        summary=summary,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        created_at=now(),
    )
    async with db.write() as session:
        session.add(row)
    return row
