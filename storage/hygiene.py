"""Keeping the store small: an agent's `max_persisted_messages`, and closed chunk logs pruned
after the retention period (docs/operations.md, "Retention and limits")."""

from dataclasses import dataclass

from sqlalchemy import delete, func, text, update
from sqlmodel import col, select

from storage.db import Database
from storage.messages import path_cte
from storage.tables import ChatSessionRow, ChunkLogRow, ChunkRow, CompactionRow, MessageRow
from storage.timing import now

TRIM_BATCH = 500
"""Messages one trim deletes at most; a session over its limit by more shrinks turn by turn."""
PRUNE_LOGS = 100
"""Logs one prune transaction takes at most."""
PRUNE_CHUNKS = 20_000
"""Chunk rows one prune transaction deletes at most (beyond its first log): a SQLite writer
holds the file's one write lock for the statement, so a batch is kept short."""

_TRIMMED = text(
    path_cte(up_to_depth=True)
    + """
    SELECT m.id FROM messages m
    WHERE m.session_id = :sid
      AND m.id NOT IN (SELECT id FROM path)
      AND (m.submission_id IS NULL OR m.submission_id NOT IN (
          SELECT id FROM submissions
          WHERE session_id = :sid AND status IN ('pending', 'running')))
    ORDER BY m.created_at, m.id
    LIMIT :n
    """
)
"""The oldest messages beyond the newest `keep` of the active path (which the recursion never
walks past), leaving out those of a turn still running (its answer will hang below them)."""


async def trim_messages(
    db: Database, *, session_id: str, keep: int, batch: int = TRIM_BATCH
) -> int:
    """Delete the session's oldest messages beyond `keep` (at most `batch`); return how many.

    The newest `keep` messages of the active path always stay, so the path stays whole: its
    oldest kept message, and any kept message whose parent went, becomes a root. Messages of
    other branches count toward the limit and go first when they are older.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    async with db.write() as session:
        # The session's lock: an admission moving the leaf meanwhile waits for this trim.
        chat = (
            await session.exec(
                select(ChatSessionRow).where(ChatSessionRow.id == session_id).with_for_update()
            )
        ).first()
        if chat is None:
            return 0
        count = (
            await session.exec(
                select(func.count())
                .select_from(MessageRow)
                .where(MessageRow.session_id == session_id)
            )
        ).one()
        if count <= keep:
            return 0
        connection = await session.connection()
        doomed = list(
            (
                await connection.execute(
                    _TRIMMED, {"sid": session_id, "keep": keep, "n": min(count - keep, batch)}
                )
            ).scalars()
        )
        if not doomed:
            return 0
        in_session = col(MessageRow.session_id) == session_id
        await connection.execute(
            delete(MessageRow).where(in_session, col(MessageRow.id).in_(doomed))
        )
        await connection.execute(
            update(MessageRow)
            .where(in_session, col(MessageRow.parent_id).in_(doomed))
            .values(parent_id=None)
        )
        # A summary applies through the last message it covers; with that message gone it
        # can never apply again (the model sees the kept messages only, as the user does).
        await connection.execute(
            delete(CompactionRow).where(
                col(CompactionRow.session_id) == session_id,
                col(CompactionRow.up_to_message_id).in_(doomed),
            )
        )
        return len(doomed)


_PRUNABLE = text(
    """
    SELECT l.message_id, l.next_seq FROM chunk_logs l
    WHERE l.pruned_at IS NULL AND l.closed_at IS NOT NULL AND l.closed_at <= :before
      AND NOT EXISTS (
          SELECT 1 FROM submissions sub
          JOIN sessions child ON child.id = sub.session_id
          JOIN submissions up ON up.session_id = child.parent_session_id
          WHERE sub.assistant_message_id = l.message_id
            AND up.status IN ('pending', 'running'))
    ORDER BY l.closed_at, l.message_id
    LIMIT :n
    """
)
"""Closed logs past the retention period, oldest first, except a sub-agent's while its
parent's turn is active: the parent reads the child's closed log for the call's result."""


@dataclass(frozen=True)
class Pruned:
    logs: int
    chunks: int


async def prune_closed_logs(
    db: Database, *, closed_before: float, logs: int = PRUNE_LOGS, chunks: int = PRUNE_CHUNKS
) -> Pruned:
    """One batch: delete the chunks of logs closed before `closed_before` (at most `logs` logs
    and about `chunks` rows), keeping each log's row marked `pruned_at`."""
    async with db.write() as session:
        connection = await session.connection()
        candidates = (
            await connection.execute(_PRUNABLE, {"before": closed_before, "n": logs})
        ).all()
        chosen: list[str] = []
        rows = 0
        for message_id, next_seq in candidates:
            if chosen and rows + next_seq > chunks:
                break
            chosen.append(message_id)
            rows += next_seq
        if not chosen:
            return Pruned(logs=0, chunks=0)
        # Locked in message-id order, as appenders lock logs: no deadlock with them.
        await connection.execute(
            select(ChunkLogRow.message_id)
            .where(col(ChunkLogRow.message_id).in_(sorted(chosen)))
            .order_by(col(ChunkLogRow.message_id))
            .with_for_update()
        )
        deleted = await connection.execute(
            delete(ChunkRow).where(col(ChunkRow.message_id).in_(chosen))
        )
        await connection.execute(
            update(ChunkLogRow)
            .where(col(ChunkLogRow.message_id).in_(chosen))
            .values(pruned_at=now())
        )
        return Pruned(logs=len(chosen), chunks=int(deleted.rowcount or 0))
