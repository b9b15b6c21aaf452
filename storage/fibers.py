"""The fibers ledger: idempotent starts, fenced attempts and stashes, terminal settling, and the
fiber kinds the workers serve. Every read and change a request makes is scoped to its tenant.

Events of a fiber go to the `events` table under the key `fiber/{id}`, which no chat session
id can take (`/` is not allowed in one), so a session's events never include a fiber's.
"""

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, delete, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from perdure.domain.fiber_payloads import TERMINAL_FIBER_STATUSES, FiberKind
from storage.db import POSTGRES_CONNECT_ARGS, Database
from storage.fiber_tables import FiberKindRow, FiberRow
from storage.tables import EventRow
from storage.timing import now
from storage.urls import is_sqlite, sync_url

TERMINAL = tuple(sorted(TERMINAL_FIBER_STATUSES))


class StaleFiberAttempt(Exception):
    """A newer attempt has claimed the fiber (or it has ended): this attempt may not write."""


def new_fiber_id() -> str:
    return uuid.uuid4().hex


def fiber_events_key(fiber_id: str) -> str:
    return f"fiber/{fiber_id}"


def _event(fiber_id: str, type: str, data: dict[str, Any], at: float) -> EventRow:
    return EventRow(
        session_id=fiber_events_key(fiber_id),
        submission_id=None,
        type=type,
        data=data,
        created_at=at,
    )


@dataclass(frozen=True)
class RecordOutcome:
    fiber: FiberRow
    created: bool
    """False: the idempotency key named a fiber that already existed (`accepted: false`)."""


async def _by_key(session: AsyncSession, tenant_id: str, key: str) -> FiberRow | None:
    rows = await session.exec(
        select(FiberRow).where(FiberRow.tenant_id == tenant_id, FiberRow.idempotency_key == key)
    )
    return rows.first()


async def record_fiber(
    db: Database,
    *,
    tenant_id: str,
    kind: FiberKind,
    payload: Any,
    idempotency_key: str | None,
    metadata: dict[str, Any],
) -> RecordOutcome:
    """A new `pending` fiber, or the tenant's fiber that already has `idempotency_key`."""
    try:
        async with db.write() as session:
            if idempotency_key is not None:
                existing = await _by_key(session, tenant_id, idempotency_key)
                if existing is not None:
                    return RecordOutcome(existing, created=False)
            fiber = FiberRow(
                id=new_fiber_id(),
                tenant_id=tenant_id,
                agent=kind.agent,
                name=kind.name,
                idempotency_key=idempotency_key,
                status="pending",
                payload=payload,
                meta=metadata,
                created_at=now(),
            )
            session.add(fiber)
        return RecordOutcome(fiber, created=True)
    except IntegrityError:
        # Two starts with one key at once (PostgreSQL): the other one's insert won.
        if idempotency_key is None:
            raise
        async with db.read() as session:
            existing = await _by_key(session, tenant_id, idempotency_key)
        if existing is None:
            raise
        return RecordOutcome(existing, created=False)


async def forget_unstarted(db: Database, *, fiber_id: str) -> None:
    """Undo a start whose workflow could not be started: nothing stays half-written."""
    async with db.write() as session:
        connection = await session.connection()
        await connection.execute(
            delete(FiberRow).where(col(FiberRow.id) == fiber_id, col(FiberRow.status) == "pending")
        )


async def load_fiber(db: Database, fiber_id: str) -> FiberRow | None:
    """Any tenant's fiber: for the worker, which acts on a fiber it was handed."""
    async with db.read() as session:
        return await session.get(FiberRow, fiber_id)


async def get_fiber(db: Database, *, tenant_id: str, fiber_id: str) -> FiberRow | None:
    fiber = await load_fiber(db, fiber_id)
    return fiber if fiber is not None and fiber.tenant_id == tenant_id else None


async def get_fiber_by_key(db: Database, *, tenant_id: str, key: str) -> FiberRow | None:
    async with db.read() as session:
        return await _by_key(session, tenant_id, key)


async def list_fibers(
    db: Database,
    *,
    tenant_id: str,
    status: str | None,
    name: str | None,
    limit: int,
    offset: int,
) -> tuple[list[FiberRow], int]:
    """Newest first."""
    conditions = [FiberRow.tenant_id == tenant_id]
    if status is not None:
        conditions.append(FiberRow.status == status)
    if name is not None:
        conditions.append(FiberRow.name == name)
    async with db.read() as session:
        total = (
            await session.exec(select(func.count()).select_from(FiberRow).where(*conditions))
        ).one()
        rows = await session.exec(
            select(FiberRow)
            .where(*conditions)
            .order_by(col(FiberRow.created_at).desc(), col(FiberRow.id))
            .offset(offset)
            .limit(limit)
        )
        return list(rows.all()), total


async def stale_unsettled_fibers(db: Database, *, older_than: float, limit: int) -> list[FiberRow]:
    """Pending or running fibers created more than `older_than` seconds ago, oldest first."""
    async with db.read() as session:
        rows = await session.exec(
            select(FiberRow)
            .where(
                col(FiberRow.status).in_(("pending", "running")),
                col(FiberRow.created_at) <= now() - older_than,
            )
            .order_by(col(FiberRow.created_at), col(FiberRow.id))
            .limit(limit)
        )
        return list(rows.all())


async def _locked(session: AsyncSession, fiber_id: str) -> FiberRow | None:
    rows = await session.exec(select(FiberRow).where(FiberRow.id == fiber_id).with_for_update())
    return rows.first()


@dataclass(frozen=True)
class Claim:
    fiber: FiberRow
    attempt: int
    """This attempt's number: its stashes and its ending are fenced by it."""
    outcome: Literal["run", "recover", "ended", "too_old"]
    """`ended`: already terminal, nothing to do; `too_old`: settled `error` just now."""


async def claim_fiber(db: Database, *, fiber_id: str, max_age_seconds: float) -> Claim | None:
    """Make the calling attempt the fiber's only writer, with its `fiber.started` or
    `fiber.recovered` event; None when the fiber is gone (deleted).

    A fiber an earlier attempt had started is a recovery — unless it was created longer than
    `max_age_seconds` ago: then it is settled `error` instead, never run again."""
    at = now()
    async with db.write() as session:
        fiber = await _locked(session, fiber_id)
        if fiber is None:
            return None
        if fiber.status in TERMINAL_FIBER_STATUSES:
            return Claim(fiber, attempt=fiber.attempts, outcome="ended")
        recovering = fiber.status == "running"
        age = at - fiber.created_at
        if recovering and age > max_age_seconds:
            fiber.status = "error"
            fiber.error = (
                f"not recovered: the fiber is {age:.0f} s old, older than its maximum age of "
                f"{max_age_seconds:g} s"
            )
            fiber.completed_at = at
            session.add(fiber)
            session.add(
                _event(
                    fiber_id,
                    "fiber.failed",
                    {"reason": "max_age_exceeded", "error": fiber.error, "attempt": fiber.attempts},
                    at,
                )
            )
            return Claim(fiber, attempt=fiber.attempts, outcome="too_old")
        fiber.attempts += 1
        fiber.status = "running"
        fiber.started_at = fiber.started_at or at
        session.add(fiber)
        if recovering:
            data = {"attempt": fiber.attempts, "hasSnapshot": fiber.snapshot is not None}
            session.add(_event(fiber_id, "fiber.recovered", data, at))
        else:
            session.add(_event(fiber_id, "fiber.started", {"attempt": fiber.attempts}, at))
        return Claim(fiber, attempt=fiber.attempts, outcome="recover" if recovering else "run")


async def stash_fiber(db: Database, *, fiber_id: str, attempt: int, snapshot: Any) -> None:
    """Replace the snapshot, durably, unless a newer attempt owns the fiber or it has ended."""
    async with db.write() as session:
        connection = await session.connection()
        written = await connection.execute(
            update(FiberRow)
            .where(
                col(FiberRow.id) == fiber_id,
                col(FiberRow.attempts) == attempt,
                col(FiberRow.status) == "running",
            )
            .values(snapshot=snapshot)
        )
    if written.rowcount != 1:
        raise StaleFiberAttempt(f"fiber {fiber_id}: attempt {attempt} no longer owns it")


async def settle_fiber(
    db: Database,
    *,
    fiber_id: str,
    status: Literal["completed", "cancelled", "error"],
    event: dict[str, Any],
    attempt: int | None = None,
    result: Any = None,
    error: str | None = None,
) -> FiberRow | None:
    """End the fiber with `status` and its `fiber.<completed|cancelled|failed>` event, in one
    transaction. A fiber that has already ended is returned unchanged (no second event).

    With `attempt`, only that attempt may end it (`StaleFiberAttempt` otherwise)."""
    at = now()
    async with db.write() as session:
        fiber = await _locked(session, fiber_id)
        if fiber is None or fiber.status in TERMINAL_FIBER_STATUSES:
            return fiber
        if attempt is not None and fiber.attempts != attempt:
            raise StaleFiberAttempt(f"fiber {fiber_id}: attempt {attempt} no longer owns it")
        fiber.status = status
        fiber.completed_at = at
        if status == "completed":
            fiber.result = result
        fiber.error = error
        session.add(fiber)
        kind = "failed" if status == "error" else status
        session.add(_event(fiber_id, f"fiber.{kind}", {"attempt": fiber.attempts, **event}, at))
        return fiber


DeleteOutcome = Literal["deleted", "not_found", "active"]


async def delete_fiber(db: Database, *, tenant_id: str, fiber_id: str) -> DeleteOutcome:
    """Delete an ended fiber with its events; a pending or running one is refused."""
    async with db.write() as session:
        fiber = await _locked(session, fiber_id)
        if fiber is None or fiber.tenant_id != tenant_id:
            return "not_found"
        if fiber.status not in TERMINAL_FIBER_STATUSES:
            return "active"
        connection = await session.connection()
        key = fiber_events_key(fiber_id)
        await connection.execute(delete(EventRow).where(col(EventRow.session_id) == key))
        await session.delete(fiber)
    return "deleted"


async def delete_ended_fibers(
    db: Database, *, tenant_id: str, completed_before: float, status: str | None
) -> int:
    """Delete the tenant's fibers that ended before `completed_before` (optionally only those
    with `status`), with their events; how many."""
    statuses = [status] if status is not None else list(TERMINAL)
    async with db.write() as session:
        rows = await session.exec(
            select(FiberRow.id).where(
                FiberRow.tenant_id == tenant_id,
                col(FiberRow.status).in_(statuses),
                col(FiberRow.completed_at) < completed_before,
            )
        )
        ids = list(rows.all())
        if ids:
            connection = await session.connection()
            keys = [fiber_events_key(i) for i in ids]
            await connection.execute(delete(EventRow).where(col(EventRow.session_id).in_(keys)))
            await connection.execute(delete(FiberRow).where(col(FiberRow.id).in_(ids)))
    return len(ids)


async def fiber_events(db: Database, *, fiber_id: str, after_id: int, limit: int) -> list[EventRow]:
    async with db.read() as session:
        rows = await session.exec(
            select(EventRow)
            .where(EventRow.session_id == fiber_events_key(fiber_id), col(EventRow.id) > after_id)
            .order_by(col(EventRow.id))
            .limit(limit)
        )
        return list(rows.all())


async def fiber_kinds(db: Database, *, task_queue: str) -> list[FiberKind]:
    async with db.read() as session:
        rows = await session.exec(select(FiberKindRow).where(FiberKindRow.task_queue == task_queue))
        return [
            FiberKind(
                agent=row.agent,
                name=row.name,
                max_age_seconds=row.max_age_seconds,
                max_run_seconds=row.max_run_seconds,
                max_attempts=row.max_attempts,
                hook_timeout_seconds=row.hook_timeout_seconds,
            )
            for row in rows.all()
        ]


PUBLISH_TRIES = 3


def publish_fiber_kinds(
    url: str, *, task_queue: str, agents: list[str], kinds: list[FiberKind]
) -> None:
    """Record what a starting worker serves (blocking: run once, before the worker polls, so a
    gateway never refuses a fiber a running worker serves). The worker is the authority on
    the agents it serves: their fibers it no longer declares are dropped."""
    engine = create_engine(
        sync_url(url), connect_args={"timeout": 30} if is_sqlite(url) else POSTGRES_CONNECT_ARGS
    )
    try:
        for tries_left in reversed(range(PUBLISH_TRIES)):
            try:
                _replace_kinds(engine, task_queue=task_queue, agents=agents, kinds=kinds)
                return
            except IntegrityError:
                # Another worker of the queue published the same kinds at the same moment.
                if not tries_left:
                    raise
    finally:
        engine.dispose()


def _replace_kinds(
    engine: Engine, *, task_queue: str, agents: list[str], kinds: list[FiberKind]
) -> None:
    with Session(engine) as session, session.begin():
        session.execute(
            delete(FiberKindRow).where(
                col(FiberKindRow.task_queue) == task_queue, col(FiberKindRow.agent).in_(agents)
            )
        )
        at = now()
        for kind in kinds:
            session.add(
                FiberKindRow(
                    task_queue=task_queue,
                    agent=kind.agent,
                    name=kind.name,
                    max_age_seconds=kind.max_age_seconds,
                    max_run_seconds=kind.max_run_seconds,
                    max_attempts=kind.max_attempts,
                    hook_timeout_seconds=kind.hook_timeout_seconds,
                    updated_at=at,
                )
            )
