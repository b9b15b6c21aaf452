"""`perdure.start_fiber()` in the worker: code in any activity (a tool, a hook, a fiber) starts
fibers of the tenant its turn or fiber serves, through a starter bound for every activity."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pydantic_core import to_jsonable_python
from temporalio.client import Client
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from perdure.agents_registry import AgentRegistry
from perdure.domain.fiber_payloads import (
    MAX_FIBER_METADATA_BYTES,
    MAX_FIBER_PAYLOAD_BYTES,
    TERMINAL_FIBER_STATUSES,
    FiberKind,
    FiberStatus,
    resolve_fiber_kind,
)
from perdure.domain.payloads import TurnRef
from perdure.fibers import (
    FiberStart,
    FiberStarter,
    FiberState,
    bind_fiber_starter,
    json_size,
    unbind_fiber_starter,
)
from perdure.turn_control.fibers import start_fiber, wait_fiber_ended
from storage.db import Database
from storage.fiber_tables import FiberRow
from storage.fibers import load_fiber
from storage.submission_reads import get_submission


def _at(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def fiber_state(fiber: FiberRow) -> FiberState:
    return FiberState(
        fiber_id=fiber.id,
        name=fiber.name,
        agent=fiber.agent,
        status=cast(FiberStatus, fiber.status),
        result=fiber.result,
        error=fiber.error,
        snapshot=fiber.snapshot,
        metadata=fiber.meta,
        idempotency_key=fiber.idempotency_key,
        attempts=fiber.attempts,
        created_at=datetime.fromtimestamp(fiber.created_at, UTC),
        started_at=_at(fiber.started_at),
        completed_at=_at(fiber.completed_at),
    )


def _ids_of(caller: Any) -> Any:
    """What carries the ids of an activity's input: a turn's payload its `turn`, any other
    (a fiber's run, an admission) itself."""
    turn = getattr(caller, "turn", None)
    return turn if isinstance(turn, TurnRef) else caller


class WorkerFiberStarter(FiberStarter):
    """`perdure.start_fiber()` inside an activity: the fiber belongs to the tenant of the turn
    or fiber the activity serves, and defaults to its agent."""

    def __init__(
        self,
        *,
        db: Database,
        client: Client,
        task_queue: str,
        agents: AgentRegistry,
        kinds: list[FiberKind],
        caller: Any,
    ) -> None:
        self._db = db
        self._client = client
        self._task_queue = task_queue
        self._agents = agents
        self._kinds = kinds
        self._caller = caller

    async def _tenant(self) -> str:
        fiber_id = getattr(self._caller, "fiber_id", None)
        if isinstance(fiber_id, str):
            fiber = await load_fiber(self._db, fiber_id)
            if fiber is not None:
                return fiber.tenant_id
        submission_id = getattr(_ids_of(self._caller), "submission_id", None)
        if isinstance(submission_id, str):
            submission = await get_submission(self._db, submission_id)
            if submission is not None:
                return submission.tenant_id
        raise RuntimeError("start_fiber(): this activity serves no turn or fiber (no tenant)")

    async def start(
        self,
        name: str,
        payload: Any,
        *,
        agent: str | None,
        idempotency_key: str | None,
        metadata: dict[str, Any] | None,
    ) -> FiberStart:
        caller_agent = getattr(_ids_of(self._caller), "agent", None)
        kind = resolve_fiber_kind(
            self._kinds,
            name=name,
            agent=agent,
            caller_agent=caller_agent if isinstance(caller_agent, str) else None,
        )
        definition = self._agents.resolve(kind.agent).fibers()[kind.name]
        raw = to_jsonable_python(payload)
        definition.parse_payload(raw)  # pydantic's ValidationError (a ValueError) if unfit
        if json_size(raw) > MAX_FIBER_PAYLOAD_BYTES:
            raise ValueError(f"a fiber payload may be {MAX_FIBER_PAYLOAD_BYTES} bytes of JSON")
        meta = to_jsonable_python(metadata or {})
        if json_size(meta) > MAX_FIBER_METADATA_BYTES:
            raise ValueError(f"fiber metadata may be {MAX_FIBER_METADATA_BYTES} bytes of JSON")
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 300:
            raise ValueError("an idempotency key is 1 to 300 characters")
        outcome = await start_fiber(
            self._db,
            self._client,
            task_queue=self._task_queue,
            tenant_id=await self._tenant(),
            kind=kind,
            kinds=self._kinds,
            payload=raw,
            idempotency_key=idempotency_key,
            metadata=meta,
        )
        state = fiber_state(outcome.fiber)
        return FiberStart(fiber_id=state.fiber_id, status=state.status, accepted=outcome.created)

    async def wait(self, fiber_id: str, *, max_wait: timedelta) -> FiberState:
        await wait_fiber_ended(self._client, fiber_id, max_wait=max_wait.total_seconds())
        fiber = await load_fiber(self._db, fiber_id)
        if fiber is None:
            raise LookupError(f"fiber {fiber_id} is gone (deleted)")
        if fiber.status not in TERMINAL_FIBER_STATUSES:
            raise TimeoutError(f"fiber {fiber_id} is still {fiber.status} after {max_wait}")
        return fiber_state(fiber)


class FiberStarterInterceptor(Interceptor):
    """Binds a `WorkerFiberStarter` for every activity this worker runs."""

    def __init__(self, starter_for: Callable[[Any], FiberStarter]) -> None:
        self.starter_for = starter_for

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _BindStarter(next, self)


class _BindStarter(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, owner: FiberStarterInterceptor) -> None:
        super().__init__(next)
        self._owner = owner

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        caller = input.args[0] if input.args else None
        token = bind_fiber_starter(self._owner.starter_for(caller))
        try:
            return await self.next.execute_activity(input)
        finally:
            unbind_fiber_starter(token)
