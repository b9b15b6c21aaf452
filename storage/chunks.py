"""The chunk log: every UI chunk of an assistant message, in order, addressed by seq."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from domain.ui import Chunk
from storage.db import Database
from storage.pg_listener import CHANNEL
from storage.tables import ChunkLog, ChunkRow, Submission
from storage.timing import now


class StaleWriter(Exception):
    """The log refused a write: a newer attempt of the same writer claimed it, or it is closed."""


@dataclass(frozen=True)
class LogWriter:
    """Who appends: `key` names the writing activity (stable across its retries), `attempt`
    its Temporal attempt. Once attempt n+1 of a key has claimed a log, attempt n is fenced."""

    key: str
    attempt: int


@dataclass(frozen=True)
class ProviderCursor:
    submission_id: str
    value: dict[str, Any]


async def _locked_log(session: AsyncSession, message_id: str) -> ChunkLog:
    """The log's row, locked for this transaction (created on first use)."""
    connection = await session.connection()
    dialect_insert = sqlite_insert if connection.dialect.name == "sqlite" else pg_insert
    await connection.execute(
        dialect_insert(ChunkLog)
        .values(message_id=message_id, next_seq=0, closed=False, fences={})
        .on_conflict_do_nothing(index_elements=["message_id"])
    )
    locked = (
        select(ChunkLog)
        .where(ChunkLog.message_id == message_id)
        .with_for_update()
        .execution_options(populate_existing=True)  # a row cached earlier may predate the lock
    )
    return (await session.exec(locked)).one()


def _admit_writer(log: ChunkLog, writer: LogWriter) -> None:
    if log.closed:
        raise StaleWriter(f"the log of {log.message_id} is closed")
    newest = log.fences.get(writer.key, 0)
    if newest > writer.attempt:
        raise StaleWriter(
            f"attempt {writer.attempt} of {writer.key} was superseded by attempt {newest}"
        )
    if newest < writer.attempt:
        log.fences = {**log.fences, writer.key: writer.attempt}


async def claim_log(db: Database, *, message_id: str, writer: LogWriter) -> None:
    """Fence off the writer's earlier attempts before this one reads the log: from the commit
    on, the store refuses their writes, so a paused attempt can never interleave with it."""
    async with db.write() as session:
        log = await _locked_log(session, message_id)
        _admit_writer(log, writer)
        session.add(log)


async def insert_chunks(
    session: AsyncSession,
    *,
    message_id: str,
    chunks: list[Chunk],
    writer: LogWriter,
    notify: bool,
    cursor: ProviderCursor | None = None,
    close: bool = False,
) -> int:
    """Append inside the caller's transaction and return the last seq.

    Raises `StaleWriter` when the writer is fenced or the log is closed. With `cursor`, the
    submission's provider cursor moves in the same transaction, so it never points before or
    after what the log holds. With `close`, nothing can be appended after these chunks.
    """
    log = await _locked_log(session, message_id)
    _admit_writer(log, writer)
    connection = await session.connection()
    if cursor is not None:
        await connection.execute(
            update(Submission)
            .where(col(Submission.id) == cursor.submission_id)
            .values(provider_cursor=cursor.value)
        )
    first = log.next_seq
    created = now()
    await connection.execute(
        insert(ChunkRow),
        [
            {
                "message_id": message_id,
                "seq": first + i,
                "attempt": writer.attempt,
                "body": chunk,
                "created_at": created,
            }
            for i, chunk in enumerate(chunks)
        ],
    )
    log.next_seq = first + len(chunks)
    log.closed = log.closed or close
    session.add(log)
    if notify:
        await connection.execute(
            text("SELECT pg_notify(:channel, :message_id)"),
            {"channel": CHANNEL, "message_id": message_id},
        )
    return log.next_seq - 1


async def append_chunks(
    db: Database,
    *,
    message_id: str,
    chunks: list[Chunk],
    writer: LogWriter,
    cursor: ProviderCursor | None = None,
) -> int:
    """Append in one transaction and return the last seq (see `insert_chunks`)."""
    if not chunks:
        raise ValueError("append_chunks needs at least one chunk")
    async with db.write() as session:
        return await insert_chunks(
            session,
            message_id=message_id,
            chunks=chunks,
            writer=writer,
            notify=not db.is_sqlite,
            cursor=cursor,
        )


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
