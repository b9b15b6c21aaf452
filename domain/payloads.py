"""Payloads that cross Temporal: ids and small settings, never conversation text.

Activities load what they need from the store by these ids, so workflow history stays
O(steps) however long a conversation grows.
"""

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

Outcome = Literal["completed", "aborted", "error", "skipped"]


class TurnInput(BaseModel):
    submission_id: str
    session_id: str
    assistant_message_id: str
    agent: str
    admitted: bool = False
    """True when the gateway already claimed the session; otherwise wait for the admit signal."""


class TurnResult(BaseModel):
    outcome: Outcome
    steps: int
    """Model steps in the answer's log."""


class ModelStepInput(BaseModel):
    submission_id: str
    session_id: str
    assistant_message_id: str
    agent: str
    step: int = Field(ge=0)
    """The step's index in the answer's log (steps are counted there and nowhere else);
    retries keep it, so an attempt can tell a step an earlier attempt opened (or finished)
    from a new one."""


class ToolCallRef(BaseModel):
    tool_call_id: str
    tool_name: str
    idempotent: bool = True


class ModelStepResult(BaseModel):
    finish_reason: str
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    max_steps: int
    next_step: int = Field(validation_alias=AliasChoices("next_step", "log_steps"))
    """The `step` of the next call: the steps in the log afterwards (a repair may add one).
    Histories recorded before the rename carry it as `log_steps`."""


class RunToolInput(BaseModel):
    submission_id: str
    session_id: str
    assistant_message_id: str
    agent: str
    tool_call_id: str


class FinishTurnInput(BaseModel):
    submission_id: str
    session_id: str
    assistant_message_id: str
    agent: str
    outcome: Outcome
    finish_reason: str | None = None
    error_text: str | None = Field(default=None, max_length=4000)
    exhausted: bool = False
    """Recovery gave up: end the answer with the agent's terminal message."""
    persist_partial: bool = True
    """False when `on_chat_recovery` declined to keep the partial text (settled tool results
    are kept regardless)."""


class ReconcileInput(BaseModel):
    older_than_seconds: float = Field(default=60.0, ge=0)
    """Only submissions at least this old: younger ones may still be starting normally."""


class ReconcileReport(BaseModel):
    started: list[str] = Field(default_factory=list)
    """Active submissions that had no workflow (their gateway died before starting it)."""
    closed: list[str] = Field(default_factory=list)
    """Active submissions whose workflow had ended without finishing them (e.g. terminated)."""
