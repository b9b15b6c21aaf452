"""What a submitter asks for beyond a user message: the options an intake records
(storage/intake.py)."""

from dataclasses import dataclass, field
from typing import Any

from perdure.domain.concurrency import ConcurrencyStrategy
from perdure.domain.ui import UIMessage
from storage.tenant_policies import TenantLimits


@dataclass(frozen=True)
class ParentCall:
    """The tool call a sub-agent's session answers."""

    session_id: str
    tool_call_id: str


@dataclass(frozen=True)
class SubmissionOptions:
    """What some submissions carry beyond a user message."""

    parent: ParentCall | None = None
    """A sub-agent's turn: a new session is linked to the tool call it answers."""
    client_tools: list[dict[str, Any]] | None = None
    """The request's own client tools, for this turn."""
    prior_messages: list[UIMessage] = field(default_factory=list)
    """User messages applied before the last one, in order, when the turn starts."""
    submission_id: str | None = None
    """The submitter's own id for the submission (else one is made)."""
    metadata: dict[str, Any] | None = None
    concurrency: ConcurrencyStrategy | None = None
    """While a turn runs: the request's strategy (else the agent's, from `task_queue`)."""
    debounce_ms: int | None = None
    """With `debounce`: the request's quiet period (else the agent's)."""
    task_queue: str | None = None
    """Where the agents' recorded strategies are looked up."""
    regenerate: bool = False
    """Answer the stored user message `message` again, as a sibling of its earlier answers."""
    edit_of: str | None = None
    """`message` edits this stored user message: it is applied as its sibling."""
    continue_last: bool = False
    """Go on from the active path's last message, an assistant's (`message` is ignored)."""
    limits: TenantLimits | None = None
    """A gateway request's: the tenant's allowed agents and rate limit, checked before a new
    submission is recorded (a repeat that returns an existing one is not checked again)."""

    @property
    def answers_again(self) -> bool:
        """A regenerate, an edit or a continue: it goes back to a stored message."""
        return self.regenerate or bool(self.edit_of) or self.continue_last
