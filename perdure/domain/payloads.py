"""Payloads that cross Temporal: ids and small settings, never conversation text.

Activities load what they need from the store by these ids, so workflow history stays
O(steps) however long a conversation grows.
"""

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from perdure.domain.turn_labels import TurnLabels

Outcome = Literal["completed", "aborted", "error", "skipped"]


class TurnRef(BaseModel):
    """A turn's identity: the ids its submission, its answer's log and its agent are found by."""

    model_config = ConfigDict(frozen=True)

    submission_id: str
    session_id: str
    assistant_message_id: str
    agent: str


TURN_REF_FIELDS = tuple(TurnRef.model_fields)


class OfTurn(BaseModel):
    """A payload about one turn, named by `turn`."""

    turn: TurnRef

    @model_validator(mode="before")
    @classmethod
    def _fold_flat_ids(cls, data: Any) -> Any:
        """Payloads recorded before `turn` (histories, workflows started by older code) carry
        its ids flat, beside the payload's own fields."""
        if isinstance(data, dict) and "turn" not in data and "submission_id" in data:
            data = dict(data)
            data["turn"] = {name: data.pop(name) for name in TURN_REF_FIELDS if name in data}
        return data


class TurnInput(OfTurn):
    admitted: bool = False
    """True when the gateway already claimed the session; otherwise wait for the admit signal."""
    admit_at: float | None = None
    """A debounced turn (epoch seconds): from then on it admits itself if the session is idle;
    until then a later submission may take its messages over (it is skipped)."""


class TurnResult(BaseModel):
    outcome: Outcome
    steps: int
    """Model steps in the answer's log."""
    error: str | None = None
    """Why the turn ended in error: what the Temporal UI shows as the workflow's result."""


class ModelStepInput(OfTurn):
    step: int = Field(ge=0)
    """The step's index in the answer's log (steps are counted there and nowhere else);
    retries keep it, so an attempt can tell a step an earlier attempt opened (or finished)
    from a new one."""


WaitKind = Literal["approval", "client", "input"]
"""What a parked call waits for: a person's approval, the client's output, or a person's
answer to its MCP server's question (`input`)."""


class ToolCallRef(BaseModel):
    tool_call_id: str
    tool_name: str
    idempotent: bool = True
    wait: WaitKind | None = None
    """The turn parks for this call: a person's approval, or the client's output."""
    sub_agent: str | None = None
    """The agent that answers this call in a child turn."""


class ModelStepResult(BaseModel):
    finish_reason: str
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    max_steps: int
    next_step: int = Field(validation_alias=AliasChoices("next_step", "log_steps"))
    """The `step` of the next call: the steps in the log afterwards (a repair may add one).
    Histories recorded before the rename carry it as `log_steps`."""
    model: str | None = None
    """The model the agent ran (`openai:gpt-4.1-mini`): named in the next steps' summaries."""
    budget_reached: bool = False
    """The turn's model calls have used the agent's `max_turn_tokens`: its tool calls are not
    run, and the turn ends with `budget`."""
    rounds_in_step: int = 0
    """Tool rounds the step ran itself before this result (their calls and outputs are in the
    answer's log; activities/step_rounds.py): shown with the step's result in the Temporal UI."""


class RunToolInput(OfTurn):
    tool_call_id: str
    follow_task: bool = False
    """Only follow the task an earlier attempt recorded for the call (an MCP task), never
    call the tool: a call that cannot run twice, after its attempt died."""


class RunToolResult(BaseModel):
    """Histories recorded before it carry no result (None): the call was settled."""

    asked: bool = False
    """The call's MCP server asks a person first: the turn parks on the call (kind `input`)
    and runs it again with the answer."""


class ParkTurnInput(OfTurn):
    tool_call_ids: list[str] = Field(min_length=1)


class WaitRef(BaseModel):
    wait_id: str
    tool_call_id: str
    timeout_seconds: float = Field(ge=0)
    """Left of the wait when the park was recorded (a retried park never extends it)."""


class ParkTurnResult(BaseModel):
    waits: list[WaitRef]


class ResumeTurnInput(OfTurn):
    wait_ids: list[str]
    """Every wait of the park; those still unanswered have run out of time."""


class ResumeTurnResult(BaseModel):
    run: list[ToolCallRef] = Field(default_factory=list)
    """Approved calls: the workflow runs them as if the model had just made them."""


class SubTurnInput(OfTurn):
    """A sub-agent call of the parent turn `turn`."""

    tool_call_id: str
    tool_name: str


class SubTurnStart(BaseModel):
    child: TurnInput | None = None
    """The child turn to run; None when the call was settled at once (a bad task)."""
    labels: TurnLabels | None = None
    """The child's search attributes and summary (None in histories recorded before them)."""


class RelaySubTurnInput(BaseModel):
    call: SubTurnInput
    child_submission_id: str
    child_message_id: str
    settle: bool = False
    """Only settle the call from the child's closed log (no live relay)."""


class RelaySubTurnResult(BaseModel):
    settled: bool
    """False when the child parked (it waits for its own approvals): settle after it ends."""


class FinishTurnInput(OfTurn):
    outcome: Outcome
    finish_reason: str | None = None
    error_text: str | None = Field(default=None, max_length=4000)
    exhausted: bool = False
    """Recovery gave up: end the answer with the agent's terminal message."""
    persist_partial: bool = True
    """False when `on_chat_recovery` declined to keep the partial text (settled tool results
    are kept regardless)."""


class FinishTurnResult(BaseModel):
    outcome: Outcome
    """How the turn ended in the store: `aborted` when a stop was recorded before the finish
    decided its ending, whatever the workflow saw (exhausted is `error`)."""


class ReconcileInput(BaseModel):
    older_than_seconds: float = Field(default=60.0, ge=0)
    """Only submissions and fibers at least this old: younger ones may still be starting."""


class ReconcileReport(BaseModel):
    started: list[str] = Field(default_factory=list)
    """Active submissions that had no workflow (their gateway died before starting it)."""
    closed: list[str] = Field(default_factory=list)
    """Active submissions whose workflow had ended without finishing them (e.g. terminated)."""
    stops_resent: list[str] = Field(default_factory=list)
    """Running turns with a stop recorded in the store, cancelled through Temporal again."""
    fibers_started: list[str] = Field(default_factory=list)
    """Pending fibers that had no workflow (their starter died before starting it)."""
    fibers_settled: list[str] = Field(default_factory=list)
    """Unsettled fibers whose workflow had ended or could not be started: now `error`."""
    pruned_logs: int = 0
    """Closed chunk logs whose chunks were deleted after the retention period."""
    swept_blobs: int = 0
    """Workspace blobs deleted because no file names them any more."""


class AdmitDebouncedInput(BaseModel):
    submission_id: str


class AdmitDebouncedResult(BaseModel):
    admitted: bool
    """False: a turn runs ahead of it (whose end admits it) or a later submission took it over."""
