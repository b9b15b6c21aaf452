"""The chunk log: every UI chunk of an assistant message, in order, addressed by seq."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, text, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.ui import Chunk
from storage.db import Database
from storage.pg_listener import CHANNEL
from storage.tables import ChunkRow, Submission
from storage.timing import now

_MAX_SEQ_CONFLICT_RETRIES = 20


@dataclass(frozen=True)
class ProviderCursor:
    submission_id: str
    value: dict[str, Any]


async def insert_chunks(
    session: AsyncSession,
    *,
    message_id: str,
    chunks: list[Chunk],
    attempt: int,
    notify: bool,
    cursor: ProviderCursor | None = None,
) -> int:
    """Append inside the caller's transaction and return the last seq.

    With `cursor`, the submission's provider cursor moves in the same transaction, so it never
    points before or after what the log holds.
    """
    connection = await session.connection()
    if cursor is not None:
        await connection.execute(
            update(Submission)
            .where(col(Submission.id) == cursor.submission_id)
            .values(provider_cursor=cursor.value)
        )
    last = (
        await connection.execute(
            select(func.max(ChunkRow.seq)).where(ChunkRow.message_id == message_id)
        )
    ).scalar()
    first = 0 if last is None else last + 1
    created = now()
    await connection.execute(
        insert(ChunkRow),
        [
            {
                "message_id": message_id,
                "seq": first + i,
                "attempt": attempt,
                "body": chunk,
                "created_at": created,
            }
            for i, chunk in enumerate(chunks)
        ],
    )
    if notify:
        await connection.execute(
            text("SELECT pg_notify(:channel, :message_id)"),
            {"channel": CHANNEL, "message_id": message_id},
        )
    return first + len(chunks) - 1


async def append_chunks(
    db: Database,
    *,
    message_id: str,
    chunks: list[Chunk],
    attempt: int,
    cursor: ProviderCursor | None = None,
) -> int:
    """Append in one transaction and return the last seq; safe against concurrent appenders."""
    if not chunks:
        raise ValueError("append_chunks needs at least one chunk")
    for _ in range(_MAX_SEQ_CONFLICT_RETRIES):
        try:
            async with db.write() as session:
                return await insert_chunks(
                    session,
                    message_id=message_id,
                    chunks=chunks,
                    attempt=attempt,
                    notify=not db.is_sqlite,
                    cursor=cursor,
                )
        except IntegrityError:
            continue
    raise RuntimeError(f"could not append to the log of {message_id}: seq kept conflicting")


async def read_chunks(db: Database, *, message_id: str, after: int = -1) -> list[tuple[int, Chunk]]:
    async with db.read() as session:
        rows = await session.exec(
            select(ChunkRow.seq, ChunkRow.body)
            .where(ChunkRow.message_id == message_id, ChunkRow.seq > after)
            .order_by(col(ChunkRow.seq))
        )
        return [(seq, dict(body)) for seq, body in rows.all()]


async def load_log(db: Database, *, message_id: str) -> list[Chunk]:
    return [chunk for _, chunk in await read_chunks(db, message_id=message_id)]
