"""The fiber activities: run an agent's fiber (first run or recovery), and finish it; and the
worker's fiber service (those activities and the starter of activities/fiber_starter.py)."""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Interceptor

from activities._support import call_hook, heartbeating, run_hook
from activities.base import AgentActivity
from activities.fiber_starter import FiberStarterInterceptor, WorkerFiberStarter
from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.domain.fiber_payloads import (
    MAX_FIBER_RESULT_BYTES,
    TERMINAL_FIBER_STATUSES,
    FiberKind,
    FiberResult,
    FiberStatus,
    FinishFiberInput,
    RunFiberInput,
)
from perdure.domain.names import FIBER_FAILED, FINISH_FIBER_ACTIVITY, RUN_FIBER_ACTIVITY, SUPERSEDED
from perdure.fibers import (
    CANCEL_GRACE,
    FiberCancelled,
    FiberContext,
    FiberDefinition,
    FiberRecovery,
    FiberStarter,
    json_size,
)
from perdure.recovery import bind_stash, unbind_stash
from storage.db import Database
from storage.fiber_tables import FiberRow
from storage.fibers import (
    Claim,
    StaleFiberAttempt,
    claim_fiber,
    load_fiber,
    publish_fiber_kinds,
    settle_fiber,
    stash_fiber,
)

log = logging.getLogger("perdure.fibers")


def fiber_kinds_of(agents: AgentRegistry) -> list[FiberKind]:
    kinds = []
    for name in agents.names():
        agent = agents.resolve(name)
        for definition in agent.fibers().values():
            kinds.append(
                FiberKind(
                    agent=agent.name,
                    name=definition.name,
                    max_age_seconds=(definition.max_age or agent.fiber_max_age).total_seconds(),
                    max_run_seconds=definition.max_run_time.total_seconds(),
                    max_attempts=definition.max_attempts,
                    hook_timeout_seconds=agent.hook_timeout.total_seconds(),
                )
            )
    return kinds


def _failed(message: str) -> ApplicationError:
    """The fiber is settled `error` already: end the attempt, never retry it."""
    return ApplicationError(message, type=FIBER_FAILED, non_retryable=True)


def _superseded(error: StaleFiberAttempt) -> ApplicationError:
    """A paused or partitioned old attempt: a newer one owns the fiber (or it has ended)."""
    return ApplicationError(f"stopped: {error}", type=SUPERSEDED, non_retryable=True)


@dataclass(frozen=True)
class _Ran:
    status: str
    result: Any = None
    error: str | None = None


@dataclass(kw_only=True, eq=False)
class FiberActivities(AgentActivity):
    """`perdure.run_fiber` and `perdure.finish_fiber`."""

    def _found(self, agent_name: str, name: str) -> tuple[Agent, FiberDefinition] | str:
        try:
            agent = self.agents.resolve(agent_name)
        except UnknownAgent as error:
            return str(error)
        definition = agent.fibers().get(name)
        if definition is None:
            known = ", ".join(sorted(agent.fibers())) or "none"
            return f"agent {agent.name!r} declares no fiber {name!r} (its fibers: {known})"
        return agent, definition

    @activity.defn(name=RUN_FIBER_ACTIVITY)
    async def run_fiber(self, run: RunFiberInput) -> None:
        """Claim the fiber for this attempt (a second claim is a recovery), run the agent's
        method, and settle the fiber with what it returned or raised."""
        async with heartbeating():
            try:
                await self._run(run)
            except StaleFiberAttempt as error:
                raise _superseded(error) from error

    async def _run(self, run: RunFiberInput) -> None:
        found = self._found(run.agent, run.name)
        if isinstance(found, str):
            await self._settle_error(run.fiber_id, found, "unknown_fiber", attempt=None)
            raise _failed(found)
        agent, definition = found
        max_age = (definition.max_age or agent.fiber_max_age).total_seconds()
        claim = await claim_fiber(self.db, fiber_id=run.fiber_id, max_age_seconds=max_age)
        if claim is None or claim.outcome == "ended":
            return  # deleted, or an earlier attempt ended it before Temporal heard
        if claim.outcome == "too_old":
            log.warning("fiber %s not recovered: %s", run.fiber_id, claim.fiber.error)
            raise _failed(claim.fiber.error or "too old to recover")
        try:
            payload = definition.parse_payload(claim.fiber.payload)
        except ValidationError as error:
            message = f"invalid payload for fiber {definition.name!r}: " + "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}"
                for e in error.errors(include_url=False)
            )
            await self._settle_error(run.fiber_id, message, "invalid_payload", claim.attempt)
            raise _failed(message) from None
        ctx = self._context(claim, stash=True)
        if claim.outcome == "run":
            log.info("fiber %s (%s.%s) started", run.fiber_id, run.agent, run.name)
        if claim.outcome == "recover":
            log.info("fiber %s recovered (attempt %d)", run.fiber_id, claim.attempt)
            decided = await self._recovered(agent, ctx)
            if decided is not None:
                await self._end_as_decided(ctx, decided)
                return
        ran = await self._invoke(agent, definition, ctx, payload)
        if ran.status == "error":
            await self._settle_error(run.fiber_id, ran.error or "", "raised", claim.attempt)
            raise _failed(ran.error or "the fiber failed")
        if ran.status == "completed":
            log.info("fiber %s completed (attempt %d)", run.fiber_id, claim.attempt)
            await settle_fiber(
                self.db,
                fiber_id=run.fiber_id,
                status="completed",
                attempt=claim.attempt,
                result=ran.result,
                event={},
            )

    @staticmethod
    async def _recovered(agent: Agent, ctx: FiberContext) -> FiberRecovery | None:
        """The agent's decision for a recovered fiber; None (run it again) when the hook
        fails, overruns its time or answers something else."""
        try:
            decided = await call_hook(
                "on_fiber_recovered",
                lambda: agent.on_fiber_recovered(ctx),
                limit=agent.hook_timeout.total_seconds(),
            )
        except Exception:
            log.exception("on_fiber_recovered failed; fiber %s runs again", ctx.fiber_id)
            return None
        if decided is not None and not isinstance(decided, FiberRecovery):
            log.error(
                "on_fiber_recovered returned %s, not a FiberRecovery or None; fiber %s runs again",
                type(decided).__name__,
                ctx.fiber_id,
            )
            return None
        return decided

    async def _end_as_decided(self, ctx: FiberContext, decided: FiberRecovery) -> None:
        if decided.snapshot is not None:
            await ctx.stash(decided.snapshot)
        result = to_jsonable_python(decided.result) if decided.status == "completed" else None
        error = (
            (decided.error or "ended by on_fiber_recovered") if decided.status == "error" else None
        )
        if result is not None and json_size(result) > MAX_FIBER_RESULT_BYTES:
            result = None
            error = f"the result is over {MAX_FIBER_RESULT_BYTES} bytes of JSON"
        status = "error" if error is not None else decided.status
        log.info("fiber %s ended by on_fiber_recovered: %s", ctx.fiber_id, status)
        await settle_fiber(
            self.db,
            fiber_id=ctx.fiber_id,
            status=status,
            attempt=ctx.attempt,
            result=result,
            error=error,
            event={"decidedBy": "on_fiber_recovered", **({"error": error} if error else {})},
        )

    def _context(self, claim: Claim, *, stash: bool) -> FiberContext:
        fiber = claim.fiber

        async def write(snapshot: Any) -> None:
            if not stash:
                raise RuntimeError(f"fiber {fiber.id} has ended: nothing more can be stashed")
            await stash_fiber(self.db, fiber_id=fiber.id, attempt=claim.attempt, snapshot=snapshot)

        return FiberContext(
            fiber_id=fiber.id,
            name=fiber.name,
            agent=fiber.agent,
            tenant_id=fiber.tenant_id,
            snapshot=fiber.snapshot,
            metadata=fiber.meta,
            attempt=claim.attempt,
            recovered=claim.outcome == "recover",
            created_at=datetime.fromtimestamp(fiber.created_at, UTC),
            idempotency_key=fiber.idempotency_key,
            stash_writer=write,
        )

    async def _invoke(
        self, agent: Agent, definition: FiberDefinition, ctx: FiberContext, payload: Any
    ) -> _Ran:
        """Run the method in a task of its own, so that a cancel reaches it cooperatively:
        `ctx.cancelled` is set, and only after `CANCEL_GRACE` is its task cancelled."""
        token = bind_stash(ctx.stash)  # `perdure.stash()` works in a fiber too
        try:
            task = asyncio.create_task(definition.invoke(agent, ctx, payload))
        finally:
            unbind_stash(token)
        try:
            returned = await asyncio.shield(task)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None or not details.cancel_requested:
                # Not a cancel (a timed-out attempt, a worker shutting down): the next
                # attempt takes over, as after a crash.
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                raise
            await self._cancel(ctx, task)
            raise
        except StaleFiberAttempt:
            raise
        except FiberCancelled:
            return _Ran("error", error="the fiber raised FiberCancelled without being cancelled")
        except Exception as error:  # noqa: BLE001 - a fiber's failure ends it with the reason
            log.warning("fiber %s raised", ctx.fiber_id, exc_info=error)
            return _Ran("error", error=f"{type(error).__name__}: {error}"[:4000])
        result = to_jsonable_python(returned)
        size = json_size(result)
        if size > MAX_FIBER_RESULT_BYTES:
            return _Ran(
                "error",
                error=f"the result is {size} bytes of JSON; at most {MAX_FIBER_RESULT_BYTES}",
            )
        return _Ran("completed", result=result)

    async def _cancel(self, ctx: FiberContext, task: "asyncio.Task[Any]") -> None:
        ctx.cancellation.set()
        try:
            async with asyncio.timeout(CANCEL_GRACE.total_seconds()):
                await task
        except TimeoutError:
            log.warning("fiber %s ignored its cancel for %s: cut off", ctx.fiber_id, CANCEL_GRACE)
        except BaseException:  # noqa: BLE001 - however it stopped, it is cancelled
            pass
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        log.info("fiber %s cancelled (attempt %d)", ctx.fiber_id, ctx.attempt)
        await settle_fiber(
            self.db,
            fiber_id=ctx.fiber_id,
            status="cancelled",
            attempt=ctx.attempt,
            event={"stage": "running"},
        )

    async def _settle_error(
        self, fiber_id: str, message: str, reason: str, attempt: int | None
    ) -> None:
        await settle_fiber(
            self.db,
            fiber_id=fiber_id,
            status="error",
            attempt=attempt,
            error=message[:4000],
            event={"reason": reason, "error": message[:4000]},
        )

    @activity.defn(name=FINISH_FIBER_ACTIVITY)
    async def finish_fiber(self, finish: FinishFiberInput) -> FiberResult:
        """Settle a fiber its run could not (cancelled while waiting for a retry, out of time
        or attempts), then call `on_fiber_complete` for a completed one (at least once)."""
        async with heartbeating():
            fiber = await load_fiber(self.db, finish.fiber_id)
            if fiber is None:
                log.warning("fiber %s was deleted before it finished", finish.fiber_id)
                return FiberResult(fiber_id=finish.fiber_id, status="error")
            if fiber.status not in TERMINAL_FIBER_STATUSES:
                fiber = await self._settle_unsettled(fiber, finish) or fiber
            if fiber.status == "completed":
                await self._completed(fiber)
            return FiberResult(fiber_id=fiber.id, status=cast(FiberStatus, fiber.status))

    async def _settle_unsettled(self, fiber: FiberRow, finish: FinishFiberInput) -> FiberRow | None:
        if finish.outcome == "cancelled":
            return await settle_fiber(
                self.db, fiber_id=fiber.id, status="cancelled", event={"stage": "waiting"}
            )
        # A run that returned always settled its fiber first; "completed" here is a bug.
        error = finish.error_text or "the fiber's run ended without settling it"
        return await settle_fiber(
            self.db,
            fiber_id=fiber.id,
            status="error",
            error=error,
            event={"reason": finish.reason or "unsettled", "error": error},
        )

    async def _completed(self, fiber: FiberRow) -> None:
        found = self._found(fiber.agent, fiber.name)
        if isinstance(found, str):
            log.warning("fiber %s completed, but its hook cannot run: %s", fiber.id, found)
            return
        agent, _ = found
        claim = Claim(fiber, attempt=fiber.attempts, outcome="ended")
        ctx = self._context(claim, stash=False)
        await run_hook(
            "on_fiber_complete",
            lambda: agent.on_fiber_complete(ctx, fiber.result),
            limit=agent.hook_timeout.total_seconds(),
        )


@dataclass(frozen=True)
class FiberService:
    activities: list[Callable[..., Any]]
    interceptor: Interceptor


def serve_fibers(
    *, db: Database, client: Client, task_queue: str, agents: AgentRegistry
) -> FiberService:
    """The fiber activities and the starter interceptor of a worker. First records the
    fibers it serves in the store (blocking, once, before the worker polls), where the gateway
    checks starts against them."""
    kinds = fiber_kinds_of(agents)
    publish_fiber_kinds(db.url, task_queue=task_queue, agents=agents.names(), kinds=kinds)
    fibers = FiberActivities(db=db, agents=agents)

    def starter_for(caller: Any) -> FiberStarter:
        return WorkerFiberStarter(
            db=db, client=client, task_queue=task_queue, agents=agents, kinds=kinds, caller=caller
        )

    return FiberService(
        activities=[fibers.run_fiber, fibers.finish_fiber],
        interceptor=FiberStarterInterceptor(starter_for),
    )
