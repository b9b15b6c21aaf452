"""A prompt schedule's lifecycle through the API: create, read, change, pause, resume,
trigger, backfill, delete.

The store says which tenant a schedule belongs to and what it sends; its Temporal Schedule
(turn_control/prompt_schedules.py) says when. A create or a change is written to the store
first, then pushed to Temporal; a push that fails undoes the store, so nothing stays half-made.
Schedules declared on an agent (`Agent.schedules`) may be paused, resumed, triggered and
backfilled here, but not changed or deleted: the code that declares them owns them, and every
worker brings them in step at its start (`sync_declared`, with the rows
runtime/prompt_schedules.py makes of the agents).
"""

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from temporalio.client import Client, ScheduleDescription
from temporalio.service import RPCError, RPCStatusCode

from perdure.domain.prompt_schedules import Recurrence
from perdure.turn_control.lifecycle import TemporalDeadline
from perdure.turn_control.prompt_schedules import (
    backfill_prompt_schedule,
    delete_prompt_schedule,
    describe_prompt_schedule,
    ensure_prompt_schedule,
    matching_times,
    pause_prompt_schedule,
    trigger_prompt_schedule,
)
from storage.db import Database
from storage.prompt_schedules import (
    PromptScheduleDefinition,
    declared_by,
    define_schedule,
    delete_schedule,
    get_schedule,
    insert_schedule,
    new_row,
    set_paused,
    upsert_declared,
)
from storage.schedule_tables import PromptScheduleRow

T = TypeVar("T")

log = logging.getLogger("perdure.schedules")  # operators filter logs by this name: it stays

AgentAdmission = Callable[[str, str], Awaitable[None]]
"""`(tenant, agent)`: raises when the tenant may not use the agent or no worker serves it.
Checked before anything is written."""


class PromptScheduleNotFound(Exception):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} not found")
        self.schedule_id = schedule_id


class PromptScheduleExists(Exception):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} already exists")
        self.schedule_id = schedule_id


class DeclaredPromptSchedule(Exception):
    """A declared schedule belongs to the code that declares it: not changed nor deleted
    through the API."""

    def __init__(self, row: PromptScheduleRow) -> None:
        super().__init__(f"schedule {row.id!r} is declared on agent {row.agent!r}")
        self.row = row


class TemporalScheduleMissing(Exception):
    """The schedule's Temporal Schedule was deleted behind Perdure's back."""


class TemporalRefusedSchedule(Exception):
    """Temporal refused the schedule's definition (an invalid argument); the store is as it
    was before."""


class InvalidPeriod(ValueError):
    """A backfill's period that is empty, reversed or reaches into the future."""


class TooManyOccurrences(Exception):
    def __init__(self, at_most: int) -> None:
        super().__init__(f"the period has more than {at_most} occurrences")
        self.at_most = at_most


@dataclass(frozen=True)
class NewPromptSchedule:
    """A schedule created through the API."""

    tenant_id: str
    schedule_id: str
    agent: str
    session_id: str
    prompt: str
    recurrence: Recurrence
    paused: bool


PUSH_ROUNDS = 3
"""Times a change re-sends the stored definition when another change was written meanwhile:
the last writer's definition is the one Temporal keeps."""

_PUSHES: "weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock]" = (
    weakref.WeakValueDictionary()
)
"""One push at a time per schedule in this process: concurrent pushes of different rows can
reach Temporal in any order, and the one that lands last must be the newest."""


def _refused(error: Exception) -> bool:
    return isinstance(error, RPCError) and error.status == RPCStatusCode.INVALID_ARGUMENT


class PromptScheduleLifecycle:
    def __init__(
        self,
        db: Database,
        client: Client,
        *,
        task_queue: str,
        deadline: TemporalDeadline,
        admit_agent: AgentAdmission,
    ) -> None:
        self._db = db
        self._client = client
        self._task_queue = task_queue
        self._deadline = deadline
        self._admit_agent = admit_agent

    async def owned(self, tenant_id: str, schedule_id: str) -> PromptScheduleRow:
        """The tenant's schedule; another tenant's is not found, as an unknown one is."""
        row = await get_schedule(self._db, tenant_id=tenant_id, schedule_id=schedule_id)
        if row is None:
            raise PromptScheduleNotFound(schedule_id)
        return row

    async def create(self, new: NewPromptSchedule) -> PromptScheduleRow:
        await self._admit_agent(new.tenant_id, new.agent)
        row = new_row(
            tenant_id=new.tenant_id,
            schedule_id=new.schedule_id,
            agent=new.agent,
            session_id=new.session_id,
            prompt=new.prompt,
            recurrence=new.recurrence,
            source="api",
            paused=new.paused,
        )
        if not await insert_schedule(self._db, row):
            raise PromptScheduleExists(row.id)
        try:
            await self._temporal(
                ensure_prompt_schedule(self._client, row, task_queue=self._task_queue)
            )
        except Exception as error:
            # Nothing stays half-made: without its Temporal Schedule the row would never fire.
            # (A create that timed out here but reached Temporal leaves a schedule whose
            # occurrences find no row and submit nothing; creating the id again takes it over.)
            await delete_schedule(self._db, tenant_id=row.tenant_id, schedule_id=row.id)
            if _refused(error):
                raise TemporalRefusedSchedule(str(error)) from None
            raise
        return row

    async def describe(
        self, tenant_id: str, schedule_id: str
    ) -> tuple[PromptScheduleRow, ScheduleDescription | None]:
        """The stored schedule and its Temporal Schedule's description (None when that was
        deleted outside Perdure)."""
        row = await self.owned(tenant_id, schedule_id)
        described = await self._temporal(describe_prompt_schedule(self._client, **self._where(row)))
        return row, described

    async def change(
        self,
        tenant_id: str,
        schedule_id: str,
        edit: Callable[[PromptScheduleDefinition], PromptScheduleDefinition],
    ) -> PromptScheduleRow:
        """Occurrences from now on follow `edit(definition)`; its paused state, its last
        occurrence and its id stay."""
        row = await self.owned(tenant_id, schedule_id)
        if row.source == "declared":
            raise DeclaredPromptSchedule(row)
        before = PromptScheduleDefinition.of(row)
        after = edit(before)
        if after.agent != before.agent:
            await self._admit_agent(tenant_id, after.agent)
        changed = await define_schedule(
            self._db, tenant_id=tenant_id, schedule_id=row.id, definition=after
        )
        if changed is None:
            raise PromptScheduleNotFound(schedule_id)
        try:
            await self._pushed(changed)
        except Exception as error:
            # Nothing half-changed: the store goes back to what Temporal still fires, unless
            # another change has been written since.
            await define_schedule(
                self._db,
                tenant_id=tenant_id,
                schedule_id=row.id,
                definition=before,
                unless_updated_since=changed.updated_at,
            )
            if _refused(error):
                raise TemporalRefusedSchedule(str(error)) from None
            raise
        return changed

    async def set_paused(
        self, tenant_id: str, schedule_id: str, *, paused: bool
    ) -> PromptScheduleRow:
        """Temporal's schedule state is the one that counts; the store follows it."""
        row = await self.owned(tenant_id, schedule_id)
        await self._temporal(pause_prompt_schedule(self._client, **self._where(row), paused=paused))
        updated = await set_paused(self._db, tenant_id=tenant_id, schedule_id=row.id, paused=paused)
        if updated is None:
            raise PromptScheduleNotFound(schedule_id)
        return updated

    async def trigger(self, tenant_id: str, schedule_id: str) -> PromptScheduleRow:
        """One occurrence now, paused or not; answers the schedule as it stands."""
        row = await self.owned(tenant_id, schedule_id)
        await self._temporal(trigger_prompt_schedule(self._client, **self._where(row)))
        return row

    async def backfill(
        self, tenant_id: str, schedule_id: str, *, start: datetime, end: datetime, at_most: int
    ) -> list[datetime]:
        """Run the occurrences after `start` up to `end` now (none when there are more than
        `at_most`), and answer them. Each is keyed by its own time, so an occurrence that
        already ran is not submitted again."""
        row = await self.owned(tenant_id, schedule_id)
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        if start >= end:
            raise InvalidPeriod("`start` must be before `end`")
        if end > datetime.now(UTC) + timedelta(seconds=1):
            raise InvalidPeriod("`end` may not be in the future")
        where = self._where(row)
        occurrences = await self._temporal(
            matching_times(self._client, start=start, end=end, **where)
        )
        if len(occurrences) > at_most:
            raise TooManyOccurrences(at_most)
        if occurrences:
            await self._temporal(
                backfill_prompt_schedule(self._client, start=start, end=end, **where)
            )
        return occurrences

    async def delete(self, tenant_id: str, schedule_id: str) -> None:
        """Turns it already submitted go on."""
        row = await self.owned(tenant_id, schedule_id)
        if row.source == "declared":
            raise DeclaredPromptSchedule(row)
        await self._temporal(delete_prompt_schedule(self._client, **self._where(row)))
        await delete_schedule(self._db, tenant_id=tenant_id, schedule_id=row.id)

    def _where(self, row: PromptScheduleRow) -> dict[str, str]:
        return {"task_queue": self._task_queue, "tenant_id": row.tenant_id, "schedule_id": row.id}

    async def _pushed(self, row: PromptScheduleRow) -> None:
        """Bring the row's Temporal Schedule up to the stored definition (re-created if it was
        deleted outside Perdure), and again while concurrent changes overtake it. Each push
        sends the newest stored row, one at a time per schedule here (another process's changes
        are caught by the re-read)."""
        key = (row.tenant_id, row.id)
        lock = _PUSHES.get(key) or _PUSHES.setdefault(key, asyncio.Lock())
        async with lock:
            current = await get_schedule(self._db, tenant_id=row.tenant_id, schedule_id=row.id)
            for _ in range(PUSH_ROUNDS):
                if current is None:
                    return
                await self._temporal(
                    ensure_prompt_schedule(self._client, current, task_queue=self._task_queue)
                )
                latest = await get_schedule(self._db, tenant_id=row.tenant_id, schedule_id=row.id)
                if latest is None or latest.updated_at == current.updated_at:
                    return
                current = latest

    async def _temporal(self, call: Awaitable[T]) -> T:
        """`call`, bounded by the deadline; a Temporal Schedule deleted behind Perdure's back
        is `TemporalScheduleMissing`."""
        try:
            return await self._deadline(call)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise TemporalScheduleMissing() from None
            raise


async def sync_declared(
    db: Database,
    client: Client,
    *,
    task_queue: str,
    declared: list[PromptScheduleRow],
    agents: list[str],
) -> None:
    """Create or update each declared schedule (the store, then its Temporal Schedule), and
    delete those `agents` declared before and no longer do (Temporal first, so that a schedule
    never fires without its row).

    Idempotent, and safe with several workers starting at once: each step converges on the
    same rows and Temporal Schedules whichever worker gets there first. A step that fails ends
    the worker's start, which does it all again."""
    for row in declared:
        stored = await upsert_declared(db, row)
        try:
            await ensure_prompt_schedule(client, stored, task_queue=task_queue)
        except RPCError as error:
            if error.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
            raise ValueError(
                f"agent {row.agent!r}: Temporal refused schedule {row.id!r}: {error}"
            ) from error
    current = {(row.tenant_id, row.id) for row in declared}
    for stale in await declared_by(db, agents=agents):
        if (stale.tenant_id, stale.id) in current:
            continue
        await delete_prompt_schedule(
            client, task_queue=task_queue, tenant_id=stale.tenant_id, schedule_id=stale.id
        )
        await delete_schedule(db, tenant_id=stale.tenant_id, schedule_id=stale.id)
        log.info(
            "deleted schedule %s (tenant %s): agent %s no longer declares it",
            stale.id,
            stale.tenant_id,
            stale.agent,
        )
