"""Durable fibers: a start, a fiber, its events."""

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from gateway.schemas.common import AGENT_PATTERN
from perdure.domain.fiber_payloads import (
    FIBER_NAME_PATTERN,
    MAX_FIBER_METADATA_BYTES,
    MAX_FIBER_PAYLOAD_BYTES,
    FiberStatus,
)
from perdure.domain.names import fiber_workflow_id
from storage.fiber_tables import FiberRow

MAX_WAIT_SECONDS = 300.0
FIBER_ID_PATTERN = r"^[0-9a-f]{32}$"


KEY_PATTERN = r"^[^\x00-\x1f\x7f]{1,300}$"
"""An idempotency key: 1-300 characters, no control characters."""


class _Wire(BaseModel):
    """camelCase on the wire (`fiberId`, `idempotencyKey`), as the rest of the API."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class FiberCreate(_Wire):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)

    name: str = Field(pattern=FIBER_NAME_PATTERN, description="The fiber, as the agent names it.")
    agent: str | None = Field(
        default=None,
        pattern=AGENT_PATTERN,
        description="The agent that declares it; needed only when several agents declare one "
        "fiber of that name.",
    )
    payload: JsonValue = Field(
        default=None,
        description=f"What the fiber's method takes (at most {MAX_FIBER_PAYLOAD_BYTES} bytes "
        "of JSON): ids and cursors, not bulk data.",
    )
    idempotency_key: str | None = Field(
        default=None,
        pattern=KEY_PATTERN,
        description="The same key (per tenant) returns the same fiber, with `accepted: false`.",
    )
    metadata: dict[str, JsonValue] = Field(
        default_factory=dict, description=f"At most {MAX_FIBER_METADATA_BYTES} bytes of JSON."
    )
    wait: bool = Field(default=False, description="Wait until the fiber ends (`runFiber`).")
    wait_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="With `wait`: how long at most; a fiber still running then is answered "
        "with 202 and goes on.",
    )


class FiberStarted(_Wire):
    fiber_id: str
    status: FiberStatus
    accepted: bool = Field(description="False: the idempotency key named an existing fiber.")
    result: JsonValue = Field(default=None, description="Once `completed`.")
    error: str | None = Field(default=None, description="Once `error`: why.")


class FiberPublic(_Wire):
    fiber_id: str
    name: str
    agent: str
    status: FiberStatus
    idempotency_key: str | None
    payload: JsonValue
    snapshot: JsonValue = Field(description="The last `ctx.stash(…)`.")
    result: JsonValue
    error: str | None
    metadata: dict[str, JsonValue]
    attempts: int = Field(description="Runs so far: the first, then one per recovery.")
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    workflow_id: str = Field(description="Its `FiberWorkflow` in the Temporal UI.")

    @classmethod
    def of(cls, fiber: FiberRow) -> "FiberPublic":
        return cls(
            fiber_id=fiber.id,
            name=fiber.name,
            agent=fiber.agent,
            status=fiber.status,
            idempotency_key=fiber.idempotency_key,
            payload=fiber.payload,
            snapshot=fiber.snapshot,
            result=fiber.result,
            error=fiber.error,
            metadata=fiber.meta,
            attempts=fiber.attempts,
            created_at=at_time(fiber.created_at),
            started_at=at_time(fiber.started_at) if fiber.started_at is not None else None,
            completed_at=at_time(fiber.completed_at) if fiber.completed_at is not None else None,
            workflow_id=fiber_workflow_id(fiber.id),
        )


class FibersPublic(BaseModel):
    data: list[FiberPublic]
    count: int


class FiberEventPublic(_Wire):
    id: int
    type: str
    data: dict[str, JsonValue]
    created_at: datetime


class FibersDeleted(_Wire):
    deleted: int


def at_time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
