"""What agents see of recovery: hook contexts, options, and `stash()`."""

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from perdure.domain.recovery_boot import FollowUp, PendingToolCall, RecoveryBoot
from perdure.domain.ui import UIMessage


@dataclass(frozen=True)
class ChatRecoveryContext:
    """Handed to `Agent.on_chat_recovery` before each recovery attempt (docs/recovery.md
    lists its fields)."""

    incident_id: str
    attempt: int
    max_attempts: int
    kind: Literal["retry", "continue"]
    stream_id: str
    """The assistant message whose log the recovery continues."""
    request_id: str
    """The submission id."""
    session_id: str
    partial_text: str
    partial_parts: list[dict[str, Any]]
    recovery_data: Any
    """What the turn saved with `stash()`, or None."""
    messages: list[UIMessage]
    """The active path, ending with the user message being answered."""
    last_body: dict[str, Any]
    """The user message as it was submitted."""
    created_at: datetime
    """When the turn started: a hook can refuse a stale recovery (`continue_=False`), or the
    agent can set `RecoveryPolicy.max_age`."""
    incident_seen_at: datetime | None = None
    """When this incident was first seen."""


@dataclass(frozen=True)
class RecoveryOptions:
    persist: bool = True
    """Keep the partial answer if recovery stops here (settled tool results are always kept)."""
    continue_: bool = True
    """False: stop cleanly now instead of recovering."""


@dataclass(frozen=True)
class ExhaustedContext:
    """Handed once to `Agent.on_exhausted` when the recovery budget is spent."""

    incident_id: str
    request_id: str
    stream_id: str
    session_id: str
    reason: str
    partial_text: str
    terminal_message: str


@dataclass(frozen=True)
class RecoveryBootContext:
    """Handed to `Agent.on_recovery_boot` when a recovered turn has a partial to go on from,
    or follow-ups queued behind it."""

    session_id: str
    request_id: str
    default: RecoveryBoot
    settled: list[UIMessage]
    in_flight_user: UIMessage
    partial: UIMessage | None
    """The interrupted answer as the log holds it (None: nothing was streamed)."""
    queued: list[FollowUp] = field(default_factory=list)
    pending_tool_calls: list[PendingToolCall] = field(default_factory=list)
    """The partial's tool calls without a result. Settle them in the plan's partial
    (`output-available` with `output`, or `output-error`) to record their results; leave the
    partial out of the chain to drop it (the model answers afresh)."""


StashWriter = Callable[[Any], Awaitable[None]]
_stash_writer: contextvars.ContextVar[StashWriter | None] = contextvars.ContextVar(
    "perdure_stash_writer", default=None
)


async def stash(data: Any) -> None:
    """Save JSON-serializable data durably for this turn; recovery hooks get it back as
    `ctx.recovery_data`. Call it from a tool or a hook while a turn runs."""
    writer = _stash_writer.get()
    if writer is None:
        raise RuntimeError("stash() is only available while a turn runs (in a tool or a hook)")
    await writer(data)


def bind_stash(writer: StashWriter) -> contextvars.Token[StashWriter | None]:
    return _stash_writer.set(writer)


def unbind_stash(token: contextvars.Token[StashWriter | None]) -> None:
    _stash_writer.reset(token)
