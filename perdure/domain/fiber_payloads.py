"""Durable fibers as plain data: what a fiber kind allows, and the payloads crossing Temporal.

The payloads carry ids and the fiber kind's frozen limits, never the fiber's payload, snapshot
or result: those live in the store (`fibers` table), so workflow history stays small.
"""

from typing import Literal

from pydantic import BaseModel, Field

FiberStatus = Literal["pending", "running", "completed", "cancelled", "error"]
TERMINAL_FIBER_STATUSES: frozenset[str] = frozenset({"completed", "cancelled", "error"})
FiberOutcome = Literal["completed", "cancelled", "error"]

FIBER_NAME_PATTERN = r"^[A-Za-z0-9_\-.]{1,100}$"

MAX_FIBER_AGE_SECONDS = 365 * 24 * 3600.0
"""No limit above a year: every wait and budget is bounded."""
MAX_FIBER_PAYLOAD_BYTES = 1_000_000
MAX_FIBER_SNAPSHOT_BYTES = 1_000_000
MAX_FIBER_RESULT_BYTES = 1_000_000
"""Payloads, snapshots and results are ids, cursors and summaries, not bulk data (keep that
in your own storage and pass its key): each is at most this many bytes of JSON."""
MAX_FIBER_METADATA_BYTES = 16_000


class FiberKind(BaseModel):
    """One fiber an agent declares, with its limits (the worker publishes these to the store,
    where the gateway checks a start against them)."""

    model_config = {"frozen": True}

    agent: str
    name: str
    max_age_seconds: float = Field(gt=0, le=MAX_FIBER_AGE_SECONDS)
    """An interrupted fiber older than this (since it was created) is not recovered."""
    max_run_seconds: float = Field(gt=0, le=MAX_FIBER_AGE_SECONDS)
    """The time limit of one attempt."""
    max_attempts: int = Field(ge=1, le=100)
    """Attempts in all: the first run and its recoveries after crashes."""
    hook_timeout_seconds: float = Field(gt=0, le=3600)


class UnknownFiber(ValueError):
    """No served agent declares the fiber asked for; the message names the known ones."""


def _known(kinds: list[FiberKind]) -> str:
    if not kinds:
        return "no worker has registered any fiber"
    return "known fibers: " + ", ".join(sorted(f"{k.agent}.{k.name}" for k in kinds))


def resolve_fiber_kind(
    kinds: list[FiberKind], *, name: str, agent: str | None, caller_agent: str | None = None
) -> FiberKind:
    """The kind a start means: `agent`'s fiber `name`; without `agent`, the caller's agent's
    if it declares `name`, else the one agent that does."""
    if agent is not None:
        found = [k for k in kinds if k.agent == agent and k.name == name]
        if found:
            return found[0]
        if not any(k.agent == agent for k in kinds):
            raise UnknownFiber(f"unknown agent {agent!r} (no fibers); {_known(kinds)}")
        raise UnknownFiber(f"agent {agent!r} declares no fiber {name!r}; {_known(kinds)}")
    named = [k for k in kinds if k.name == name]
    mine = [k for k in named if k.agent == caller_agent]
    if mine:
        return mine[0]
    if len(named) == 1:
        return named[0]
    if not named:
        raise UnknownFiber(f"unknown fiber {name!r}; {_known(kinds)}")
    agents = ", ".join(sorted(k.agent for k in named))
    raise UnknownFiber(f"several agents declare fiber {name!r} ({agents}): name the agent")


class FiberInput(BaseModel):
    """`FiberWorkflow`'s input: the fiber's id and its kind's limits, frozen at the start."""

    fiber_id: str
    kind: FiberKind


class RunFiberInput(BaseModel):
    fiber_id: str
    agent: str
    name: str


class FinishFiberInput(BaseModel):
    fiber_id: str
    agent: str
    name: str
    outcome: FiberOutcome
    """What the workflow saw; a fiber already settled by its run keeps its own status."""
    error_text: str | None = Field(default=None, max_length=4000)
    reason: str | None = Field(default=None, max_length=64)


class FiberResult(BaseModel):
    fiber_id: str
    status: FiberStatus
