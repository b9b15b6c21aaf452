"""Prompt schedules in the store, always scoped to their tenant."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from perdure.domain.concurrency import Concurrency
from perdure.domain.prompt_schedules import Recurrence, ScheduleSource
from storage.db import Database
from storage.schedule_tables import PromptScheduleRow, ServedAgentRow
from storage.timing import now

T = TypeVar("T")
CONCURRENT_RETRIES = 3


class PromptScheduleConflict(Exception):
    """A declared schedule has the id of one created through the API (or the reverse)."""


async def _retrying_conflicts(db: Database, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """`work` in one write transaction, again if a concurrent writer inserted the same row
    first (several workers start at once): the next try sees that row."""
    for attempt in range(CONCURRENT_RETRIES):
        try:
            async with db.write() as session:
                return await work(session)
        except IntegrityError:
            if attempt == CONCURRENT_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def new_row(
    *,
    tenant_id: str,
    schedule_id: str,
    agent: str,
    session_id: str,
    prompt: str,
    recurrence: Recurrence,
    source: ScheduleSource,
    paused: bool,
) -> PromptScheduleRow:
    at = now()
    return PromptScheduleRow(
        tenant_id=tenant_id,
        id=schedule_id,
        agent=agent,
        session_id=session_id,
        prompt=prompt,
        spec=recurrence.model_dump(mode="json", exclude_none=True),
        source=source,
        paused=paused,
        created_at=at,
        updated_at=at,
    )


def recurrence_of(row: PromptScheduleRow) -> Recurrence:
    return Recurrence.model_validate(row.spec)


async def insert_schedule(db: Database, row: PromptScheduleRow) -> bool:
    """False when the tenant already has a schedule with this id."""
    try:
        async with db.write() as session:
            if await session.get(PromptScheduleRow, (row.tenant_id, row.id)) is not None:
                return False
            session.add(row)
    except IntegrityError:
        return False
    return True


async def get_schedule(
    db: Database, *, tenant_id: str, schedule_id: str
) -> PromptScheduleRow | None:
    async with db.read() as session:
        return await session.get(PromptScheduleRow, (tenant_id, schedule_id))


async def list_schedules(
    db: Database, *, tenant_id: str, limit: int, offset: int
) -> tuple[list[PromptScheduleRow], int]:
    async with db.read() as session:
        total = (
            await session.exec(
                select(func.count())
                .select_from(PromptScheduleRow)
                .where(PromptScheduleRow.tenant_id == tenant_id)
            )
        ).one()
        rows = await session.exec(
            select(PromptScheduleRow)
            .where(PromptScheduleRow.tenant_id == tenant_id)
            .order_by(col(PromptScheduleRow.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def delete_schedule(db: Database, *, tenant_id: str, schedule_id: str) -> bool:
    async with db.write() as session:
        row = await session.get(PromptScheduleRow, (tenant_id, schedule_id))
        if row is None:
            return False
        await session.delete(row)
    return True


async def set_paused(
    db: Database, *, tenant_id: str, schedule_id: str, paused: bool
) -> PromptScheduleRow | None:
    async with db.write() as session:
        row = await session.get(PromptScheduleRow, (tenant_id, schedule_id))
        if row is None:
            return None
        row.paused = paused
        row.updated_at = now()
        session.add(row)
    return row


@dataclass(frozen=True)
class PromptScheduleDefinition:
    """What a schedule sends, where, and when: the part `PATCH /v1/schedules/{id}` changes."""

    agent: str
    session_id: str
    prompt: str
    recurrence: Recurrence

    @classmethod
    def of(cls, row: PromptScheduleRow) -> "PromptScheduleDefinition":
        return cls(row.agent, row.session_id, row.prompt, recurrence_of(row))


async def define_schedule(
    db: Database,
    *,
    tenant_id: str,
    schedule_id: str,
    definition: PromptScheduleDefinition,
    unless_updated_since: float | None = None,
) -> PromptScheduleRow | None:
    """Give the schedule `definition`; None when it is gone, or (with `unless_updated_since`)
    when another change has been written since that time: a restore must not undo it."""
    async with db.write() as session:
        row = await session.get(PromptScheduleRow, (tenant_id, schedule_id))
        if row is None:
            return None
        if unless_updated_since is not None and row.updated_at != unless_updated_since:
            return None
        row.agent = definition.agent
        row.session_id = definition.session_id
        row.prompt = definition.prompt
        row.spec = definition.recurrence.model_dump(mode="json", exclude_none=True)
        row.updated_at = max(now(), row.updated_at + 1e-6)  # every change a new version
        session.add(row)
    return row


async def record_occurrence(
    db: Database,
    *,
    tenant_id: str,
    schedule_id: str,
    occurrence: str,
    submission_id: str | None,
    error: str | None,
) -> None:
    """The last occurrence's outcome, shown by `GET /v1/schedules/{id}`."""
    async with db.write() as session:
        row = await session.get(PromptScheduleRow, (tenant_id, schedule_id))
        if row is None:
            return
        row.last_occurrence = occurrence
        row.last_submission_id = submission_id
        row.last_error = error
        session.add(row)


async def upsert_declared(db: Database, declared: PromptScheduleRow) -> PromptScheduleRow:
    """Insert a declared schedule, or bring the stored one up to its declaration. The paused
    state is kept: it is changed through the API, and a worker's start must not undo that."""

    async def upsert(session: AsyncSession) -> PromptScheduleRow:
        row = await session.get(PromptScheduleRow, (declared.tenant_id, declared.id))
        if row is None:
            # A copy: a retried transaction must not re-add an instance the failed one held.
            fresh = PromptScheduleRow.model_validate(declared.model_dump())
            session.add(fresh)
            return fresh
        if row.source != "declared":
            raise PromptScheduleConflict(
                f"agent {declared.agent!r} declares schedule {declared.id!r} (tenant "
                f"{declared.tenant_id!r}), but a schedule with that id was created through the "
                "API: delete it (DELETE /v1/schedules/{id}) or rename the declared one"
            )
        row.agent = declared.agent
        row.session_id = declared.session_id
        row.prompt = declared.prompt
        row.spec = declared.spec
        row.updated_at = declared.updated_at
        session.add(row)
        return row

    return await _retrying_conflicts(db, upsert)


async def declared_by(db: Database, *, agents: list[str]) -> list[PromptScheduleRow]:
    """The declared schedules of these agents, as stored (to find the ones no longer
    declared)."""
    async with db.read() as session:
        rows = await session.exec(
            select(PromptScheduleRow).where(
                PromptScheduleRow.source == "declared", col(PromptScheduleRow.agent).in_(agents)
            )
        )
        return list(rows.all())


async def record_served_agents(
    db: Database, *, task_queue: str, concurrency: dict[str, Concurrency]
) -> None:
    """Each served agent by name, with its concurrency strategy."""
    at = now()

    async def record(session: AsyncSession) -> None:
        for name, strategy in concurrency.items():
            served = await session.get(ServedAgentRow, (task_queue, name))
            if served is None:
                served = ServedAgentRow(task_queue=task_queue, name=name, seen_at=at)
            served.seen_at = at
            served.concurrency = strategy.strategy
            served.debounce_ms = strategy.debounce_ms
            session.add(served)

    await _retrying_conflicts(db, record)


async def served_agents(db: Database, *, task_queue: str) -> list[str]:
    async with db.read() as session:
        rows = await session.exec(
            select(ServedAgentRow.name).where(ServedAgentRow.task_queue == task_queue)
        )
        return list(rows.all())
