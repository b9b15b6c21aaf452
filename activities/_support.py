"""Small helpers shared by the activities: heartbeats, hook time limits, agents, log writers."""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.domain.names import HOOK_TIMED_OUT, SUPERSEDED, TURN_STOPPED
from storage.chunks import LogWriter, StaleWriter
from storage.tables import SubmissionRow

log = logging.getLogger("perdure.activities")

HEARTBEAT_EVERY = 1.0
"""Seconds between liveness heartbeats, whatever the activity is waiting for."""

T = TypeVar("T")


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat for as long as the body runs — store writes, hooks and provider waits alike —
    so a live worker is never taken for dead, and cancellation (delivered with heartbeat
    responses) reaches the activity promptly."""

    async def beat() -> None:
        # Not at once: the activity's start already told Temporal it is alive (a stop that
        # lands meanwhile arrives with the first beat, within HEARTBEAT_EVERY). One RPC fewer
        # per activity, and a finish or a short step sends none.
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


class HookTimedOut(Exception):
    def __init__(self, name: str, limit: float) -> None:
        super().__init__(f"agent hook {name} took longer than its time limit of {limit:g} s")


async def call_hook(name: str, hook: Callable[[], Awaitable[T]], *, limit: float) -> T:
    """Run a user hook under the agent's `hook_timeout`; `HookTimedOut` when it passes it."""
    try:
        async with asyncio.timeout(limit):
            return await hook()
    except TimeoutError:
        raise HookTimedOut(name, limit) from None


async def run_hook(name: str, hook: Callable[[], Awaitable[None]], *, limit: float) -> None:
    """A notification hook: a failure or a timeout is logged and the turn goes on."""
    try:
        await call_hook(name, hook, limit=limit)
    except HookTimedOut as error:
        log.error("%s; the turn goes on", error)
    except Exception:
        log.exception("agent hook %s failed; the turn goes on", name)


def required_hook_failure(name: str, error: Exception) -> ApplicationError:
    """A hook the turn cannot go on without (e.g. `instructions`) failed: end the turn."""
    kind = HOOK_TIMED_OUT if isinstance(error, HookTimedOut) else "HookFailed"
    return ApplicationError(f"{name}: {error}", type=kind, non_retryable=True)


def resolve_agent(agents: AgentRegistry, name: str) -> Agent:
    try:
        return agents.resolve(name)
    except UnknownAgent as error:
        raise ApplicationError(str(error), type="UnknownAgent", non_retryable=True) from error


def current_writer() -> LogWriter:
    """This activity as a log writer: its id is stable across retries, its attempt is not."""
    info = activity.info()
    return LogWriter(key=f"activity:{info.activity_id}", attempt=info.attempt)


def refuse_if_stopped(submission: SubmissionRow) -> None:
    """A step does not start once a stop is recorded for its turn: the stop holds even when
    its cancellation never reached Temporal (a gateway that died after recording it)."""
    if submission.cancel_requested_at is not None:
        raise ApplicationError(
            f"submission {submission.id} was stopped", type=TURN_STOPPED, non_retryable=True
        )


def superseded(error: StaleWriter) -> ApplicationError:
    """An attempt the store has fenced off: a newer attempt owns the log, or the turn ended.
    Temporal no longer waits for this attempt, so failing it changes nothing else."""
    return ApplicationError(f"stopped writing: {error}", type=SUPERSEDED, non_retryable=True)


def submission_gone(submission_id: str) -> ApplicationError:
    """The turn's submission was deleted with its session: nothing is left to do."""
    return ApplicationError(
        f"submission {submission_id} is no longer stored (session deleted)", non_retryable=True
    )
