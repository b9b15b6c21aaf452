"""Durable fibers: long work that is not a chat turn (docs/fibers.md), on Temporal.

Declare one on an agent with `@fiber`; start it with `start_fiber()` (or `POST /v1/fibers`).
Each fiber runs as a `FiberWorkflow` whose one activity calls the agent's method. The method
checkpoints with `await ctx.stash(data)`; when its worker dies, Temporal notices within
seconds (heartbeats) and runs it again on a live worker with `ctx.snapshot` = the last stash
and `ctx.recovered` = True, after the agent's `on_fiber_recovered(ctx)` hook. A cancel sets
`ctx.cancelled`: the method stops at its next check (`ctx.check_cancelled()`) or is cut off
after a short grace.
"""

import asyncio
import contextvars
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, get_type_hints, overload

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from perdure.domain.fiber_payloads import (
    FIBER_NAME_PATTERN,
    MAX_FIBER_AGE_SECONDS,
    MAX_FIBER_SNAPSHOT_BYTES,
    FiberStatus,
)

FiberFunction = Callable[..., Awaitable[Any]]
StashWriter = Callable[[Any], Awaitable[None]]

DEFAULT_MAX_RUN_TIME = timedelta(hours=24)
DEFAULT_MAX_ATTEMPTS = 10
CANCEL_GRACE = timedelta(seconds=10)
"""How long a cancelled fiber may take to notice `ctx.cancelled` and return before its task is
cancelled outright."""
_NAME = re.compile(FIBER_NAME_PATTERN)


class FiberCancelled(Exception):
    """Raised by `ctx.check_cancelled()` once the fiber has been cancelled."""


@dataclass(frozen=True)
class FiberRecovery:
    """What `on_fiber_recovered` may decide instead of running the method again (the seeds'
    `{status, snapshot, error}`): the fiber ends now, with this status."""

    status: Literal["completed", "error", "cancelled"]
    result: Any = None
    """With `completed`: the fiber's result (JSON, at most 1 MB)."""
    error: str | None = None
    """With `error`: why (default: "ended by on_fiber_recovered")."""
    snapshot: Any = None
    """When given (not None): the snapshot the fiber keeps, replacing its last stash."""


def json_size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


class FiberContext:
    """What a fiber (and the fiber hooks) know about the fiber they serve."""

    def __init__(
        self,
        *,
        fiber_id: str,
        name: str,
        agent: str,
        tenant_id: str,
        snapshot: Any,
        metadata: dict[str, Any],
        attempt: int,
        recovered: bool,
        created_at: datetime,
        idempotency_key: str | None,
        stash_writer: StashWriter,
        cancellation: asyncio.Event | None = None,
    ) -> None:
        self.fiber_id = fiber_id
        self.name = name
        self.agent = agent
        self.tenant_id = tenant_id
        self.snapshot = snapshot
        """The last stash (None if there was none): where a recovered attempt goes on from."""
        self.metadata = metadata
        self.attempt = attempt
        """1 for the first run; each recovery after a crash adds one."""
        self.recovered = recovered
        self.created_at = created_at
        self.idempotency_key = idempotency_key
        self.cancellation = cancellation or asyncio.Event()
        """Set when the fiber is cancelled (await `ctx.cancellation.wait()` to react at once)."""
        self._stash_writer = stash_writer

    async def stash(self, data: Any) -> None:
        """Checkpoint: replace the fiber's snapshot with `data` (JSON-serializable, at most
        `MAX_FIBER_SNAPSHOT_BYTES`). Durable when it returns: it is in the store."""
        snapshot = to_jsonable_python(data)
        size = json_size(snapshot)
        if size > MAX_FIBER_SNAPSHOT_BYTES:
            raise ValueError(
                f"a stash may be {MAX_FIBER_SNAPSHOT_BYTES} bytes of JSON; this is {size}"
            )
        await self._stash_writer(snapshot)
        self.snapshot = snapshot

    @property
    def cancelled(self) -> bool:
        return self.cancellation.is_set()

    def check_cancelled(self) -> None:
        """Raise `FiberCancelled` if the fiber has been cancelled."""
        if self.cancelled:
            raise FiberCancelled(f"fiber {self.fiber_id} was cancelled")


@dataclass(frozen=True)
class FiberDefinition:
    name: str
    function: FiberFunction
    payload_type: Any
    """The annotation of the payload parameter (Any when it has none or there is none)."""
    takes_payload: bool
    max_age: timedelta | None
    """None: the agent's `fiber_max_age`."""
    max_run_time: timedelta
    max_attempts: int
    description: str = ""
    _adapter: TypeAdapter[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_adapter", TypeAdapter(self.payload_type))

    def parse_payload(self, raw: Any) -> Any:
        """The payload as the method takes it; pydantic's `ValidationError` if it does not fit."""
        return self._adapter.validate_python(raw)

    async def invoke(self, owner: object, ctx: FiberContext, payload: Any) -> Any:
        if self.takes_payload:
            return await self.function(owner, ctx, payload)
        return await self.function(owner, ctx)


def _checked_limit(owner: str, what: str, value: timedelta) -> timedelta:
    if value <= timedelta(0) or value.total_seconds() > MAX_FIBER_AGE_SECONDS:
        raise ValueError(f"fiber {owner}: {what} must be more than 0 and at most 365 days")
    return value


def _define(
    function: FiberFunction,
    *,
    name: str | None,
    max_age: timedelta | None,
    max_run_time: timedelta,
    max_attempts: int,
) -> FiberFunction:
    label = name or function.__name__
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"fiber {label} must be an async method")
    if not _NAME.match(label):
        raise ValueError(f"fiber name {label!r} must match {FIBER_NAME_PATTERN}")
    parameters = list(inspect.signature(function).parameters.values())[1:]
    if not 1 <= len(parameters) <= 2 or any(
        p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters
    ):
        raise TypeError(f"fiber {label}: the signature must be (self, ctx, payload) or (self, ctx)")
    if not 1 <= max_attempts <= 100:
        raise ValueError(f"fiber {label}: max_attempts must be from 1 to 100")
    hints = get_type_hints(function)
    definition = FiberDefinition(
        name=label,
        function=function,
        payload_type=hints.get(parameters[1].name, Any) if len(parameters) == 2 else Any,
        takes_payload=len(parameters) == 2,
        max_age=None if max_age is None else _checked_limit(label, "max_age", max_age),
        max_run_time=_checked_limit(label, "max_run_time", max_run_time),
        max_attempts=max_attempts,
        description=inspect.getdoc(function) or "",
    )
    function.__perdure_fiber__ = definition  # type: ignore[attr-defined]
    return function


@overload
def fiber(function: FiberFunction, /) -> FiberFunction: ...


@overload
def fiber(
    *,
    name: str | None = None,
    max_age: timedelta | None = None,
    max_run_time: timedelta = DEFAULT_MAX_RUN_TIME,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Callable[[FiberFunction], FiberFunction]: ...


def fiber(
    function: FiberFunction | None = None,
    /,
    *,
    name: str | None = None,
    max_age: timedelta | None = None,
    max_run_time: timedelta = DEFAULT_MAX_RUN_TIME,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> FiberFunction | Callable[[FiberFunction], FiberFunction]:
    """Mark an async agent method `(self, ctx: FiberContext, payload: T)` as a fiber.

    The payload is validated as `T` (a pydantic model, a dict…). `max_age`: an interrupted
    fiber created longer ago is not recovered (default: the agent's `fiber_max_age`).
    `max_run_time`: the time limit of one attempt. `max_attempts`: the first run and its
    recoveries after crashes, in all. A method that raises ends the fiber `error`: only a
    crash (a dead worker) is retried.
    """
    options = {
        "name": name,
        "max_age": max_age,
        "max_run_time": max_run_time,
        "max_attempts": max_attempts,
    }
    if function is not None:
        return _define(function, **options)  # type: ignore[arg-type]

    def decorate(inner: FiberFunction) -> FiberFunction:
        return _define(inner, **options)  # type: ignore[arg-type]

    return decorate


def fiber_definition(member: object) -> FiberDefinition | None:
    definition = getattr(member, "__perdure_fiber__", None)
    return definition if isinstance(definition, FiberDefinition) else None


@dataclass(frozen=True)
class FiberStart:
    fiber_id: str
    status: FiberStatus
    accepted: bool
    """False: the idempotency key named an existing fiber, which is returned (not restarted)."""


@dataclass(frozen=True)
class FiberState:
    fiber_id: str
    name: str
    agent: str
    status: FiberStatus
    result: Any
    error: str | None
    snapshot: Any
    metadata: dict[str, Any]
    idempotency_key: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None

    @property
    def ended(self) -> bool:
        return self.status in ("completed", "cancelled", "error")


class FiberStarter(Protocol):
    """Starts fibers for the code that runs in a worker's activity (bound per activity)."""

    async def start(
        self,
        name: str,
        payload: Any,
        *,
        agent: str | None,
        idempotency_key: str | None,
        metadata: dict[str, Any] | None,
    ) -> FiberStart: ...

    async def wait(self, fiber_id: str, *, max_wait: timedelta) -> FiberState: ...


_starter: contextvars.ContextVar[FiberStarter | None] = contextvars.ContextVar(
    "perdure_fiber_starter", default=None
)


def _bound() -> FiberStarter:
    starter = _starter.get()
    if starter is None:
        raise RuntimeError(
            "start_fiber()/run_fiber() work in a worker's activity (a tool, a hook or a fiber); "
            "elsewhere use POST /v1/fibers"
        )
    return starter


async def start_fiber(
    name: str,
    payload: Any = None,
    *,
    agent: str | None = None,
    idempotency_key: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> FiberStart:
    """Start fiber `name` for the caller's tenant and return at once (fire and forget: the
    fiber outlives its caller). `agent`: default the caller's agent if it declares `name`,
    else the one agent that does. The same `idempotency_key` returns the same fiber with
    `accepted=False`. `ValueError` for an unknown fiber or a payload that does not fit."""
    return await _bound().start(
        name, payload, agent=agent, idempotency_key=idempotency_key, metadata=metadata
    )


async def run_fiber(
    name: str,
    payload: Any = None,
    *,
    agent: str | None = None,
    idempotency_key: str | None = None,
    metadata: dict[str, Any] | None = None,
    max_wait: timedelta = timedelta(minutes=10),
) -> FiberState:
    """`start_fiber`, then wait (at most `max_wait`) until the fiber ends; its final state
    (`status`, `result`, `error`). `TimeoutError` if it is still running then (it goes on)."""
    started = await start_fiber(
        name, payload, agent=agent, idempotency_key=idempotency_key, metadata=metadata
    )
    return await _bound().wait(started.fiber_id, max_wait=max_wait)


def bind_fiber_starter(starter: FiberStarter) -> contextvars.Token[FiberStarter | None]:
    return _starter.set(starter)


def unbind_fiber_starter(token: contextvars.Token[FiberStarter | None]) -> None:
    _starter.reset(token)
