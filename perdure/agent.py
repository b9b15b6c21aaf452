"""`Agent`: a chat agent defined in plain Python (model, system prompt, tools, hooks)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from perdure.domain.concurrency import DEFAULT_DEBOUNCE_MS, ConcurrencyStrategy
from perdure.domain.model_rules import Display, Effort, ThinkingOptions
from perdure.domain.policy import RecoveryPolicy
from perdure.domain.recovery_boot import RecoveryBoot
from perdure.domain.repair import default_repair
from perdure.fibers import FiberContext, FiberDefinition, FiberRecovery, fiber_definition
from perdure.mcp_servers import McpServer
from perdure.recovery import (
    ChatRecoveryContext,
    ExhaustedContext,
    RecoveryBootContext,
    RecoveryOptions,
)
from perdure.schedules import PromptSchedule
from perdure.sub_agents import SubAgent
from perdure.tools import ClientTool, ToolDefinition, tool_definition


@dataclass(frozen=True)
class TurnContext:
    """What hooks learn about the turn they run in; `tenant_id` lets them scope data."""

    tenant_id: str
    session_id: str
    submission_id: str
    assistant_message_id: str
    agent: str


class Agent:
    """Subclass and set the class attributes; decorate async methods with `@tool`.

    Hooks run inside Temporal activities, so they may do I/O. Each runs under `hook_timeout`;
    an exception or a timeout in a notification hook is logged and the turn goes on, so a
    broken hook cannot lose a turn; `instructions()` failing ends the turn with a clear error.
    """

    name: ClassVar[str] = "default"
    model: ClassVar[str | None] = None
    """`openai:<model>`, `openai-responses:<model>`, `anthropic:<model>` or `demo`;
    None uses PERDURE_MODEL."""
    system_prompt: ClassVar[str] = "You are a helpful assistant."
    max_steps: ClassVar[int] = 10
    """Model steps a turn may take: a turn whose last step still calls tools ends with
    `finishReason` `budget` (in its message metadata) after running them."""
    max_turn_tokens: ClassVar[int | None] = None
    """Tokens (input + output, every recovery attempt counted) a turn's model calls may use:
    once a step passes it, the turn ends there with `budget`, its partial kept. None: no
    limit. docs/usage.md."""
    step_tool_rounds: ClassVar[int] = 20
    """Tool rounds a model step may run itself: when every call of a step is to an idempotent
    tool that waits for nobody (no approval, no client, no sub-agent), the step runs the calls
    and asks the model again at once, with no Temporal activity or workflow task in between
    (docs/architecture.md, "Tool rounds"). 0: every call runs as its own activity, each
    visible in the Temporal UI."""
    head_start: ClassVar[bool] = True
    """Send a turn's first model request at intake, through the provider relay, while the
    turn's workflow boots; the first step adopts it when its own request is the same, and the
    early one is cancelled when it is not (docs/relay.md, "Head start"). False: the first
    request leaves with the first step, and no early request is ever paid for."""
    budget_message: ClassVar[str] = "This turn reached its budget and stopped here."
    """The text that ends a turn stopped by `max_steps` or `max_turn_tokens`."""
    max_output_tokens: ClassVar[int] = 4096
    recovery: ClassVar[RecoveryPolicy] = RecoveryPolicy()
    hook_timeout: ClassVar[timedelta] = timedelta(seconds=30)
    """The time limit of every hook call (and of `instructions()`)."""
    max_tool_output_bytes: ClassVar[int] = 1_000_000
    """A tool output larger than this (as JSON) is cut, with a visible marker."""
    max_persisted_messages: ClassVar[int | None] = None
    """Keep at most this many messages per session (None: all): after each turn the oldest
    beyond it are deleted, and the oldest kept message of the active path becomes its root."""
    thinking_effort: ClassVar[Effort | None] = None
    """Claude 4.6 and later: adaptive thinking at this effort (`low`, `medium`, `high`, `max`,
    and `xhigh` from 4.7); None: no thinking asked for. docs/providers.md."""
    thinking_budget_tokens: ClassVar[int | None] = None
    """Claude up to 4.6: extended thinking with this budget in tokens (at least 1024, below
    `max_output_tokens`); refused on 4.7 and later, which think adaptively only."""
    thinking_display: ClassVar[Display | None] = None
    """`summarized` or `omitted` thinking; None: the model's default (omitted from Claude 4.7
    on, so set `summarized` to show the reasoning)."""
    fiber_max_age: ClassVar[timedelta] = timedelta(hours=24)
    """An interrupted fiber created longer ago than this is not recovered: it ends `error`
    (`@fiber(max_age=…)` overrides it per fiber)."""
    schedules: ClassVar[Sequence[PromptSchedule]] = ()
    """Prompts this agent is sent on a schedule (docs/schedules.md); workers keep their
    Temporal Schedules in step when they start."""
    client_tools: ClassVar[tuple[ClientTool, ...]] = ()
    """Tools the client runs: a call parks the turn until the client sends the output."""
    compact_after_tokens: ClassVar[int | None] = None
    """Summarize the older part of a conversation once what the model would see passes this
    many tokens (estimated); None: only when the provider says the context is full."""
    compact_keep_messages: ClassVar[int] = 6
    """Messages a compaction keeps as they are (the newest), at least."""
    concurrency: ClassVar[ConcurrencyStrategy] = "queue"
    """What a message sent while a turn runs does (a request may choose otherwise): see
    docs/api.md#concurrency."""
    debounce: ClassVar[timedelta] = timedelta(milliseconds=DEFAULT_DEBOUNCE_MS)
    """With `concurrency = "debounce"`: how long no new message must come before a turn
    starts (at most a minute)."""
    sub_agents: ClassVar[tuple[SubAgent, ...]] = ()
    """Other agents the model may call as tools (each answers in a child turn)."""
    mcp_servers: ClassVar[tuple[McpServer, ...]] = ()
    """MCP servers whose tools the model may call, as `<server>__<tool>` (docs/mcp.md)."""
    workspace_tools: ClassVar[bool | tuple[str, ...]] = False
    """The built-in tools over the session's workspace (docs/workspace.md): True for all of
    read_file, write_file, edit_file, list_files, find_files, grep and delete_file, or a tuple
    of their names."""
    workspace_approval: ClassVar[bool | tuple[str, ...]] = False
    """Which of them wait for a person's approval: True for those that change files
    (write_file, edit_file, delete_file), or a tuple of names."""

    def thinking(self) -> ThinkingOptions:
        return ThinkingOptions(
            budget_tokens=self.thinking_budget_tokens,
            effort=self.thinking_effort,
            display=self.thinking_display,
        )

    def tools(self) -> dict[str, ToolDefinition]:
        found: dict[str, ToolDefinition] = {}
        for klass in reversed(type(self).__mro__):
            for member in vars(klass).values():
                definition = tool_definition(member)
                if definition is not None:
                    found[definition.name] = definition
        return found

    def sub_agent(self, name: str) -> SubAgent | None:
        return next((s for s in self.sub_agents if s.name == name), None)

    async def instructions(self, ctx: TurnContext) -> str:
        """The system prompt for this turn; override to make it dynamic."""
        return self.system_prompt

    async def stall_timeout(self, ctx: TurnContext) -> timedelta:
        """How long this turn's model steps may go without a provider chunk before the stream
        is aborted and recovered (asked at every model step; default: the recovery policy's
        `stall_timeout`). A slow reasoning turn may want longer than a quick one. An
        exception, or running past `hook_timeout`, means the policy's."""
        return self.recovery.stall_timeout

    async def on_turn_start(self, ctx: TurnContext) -> None:
        """Called before the first model call of a turn (at least once: a worker dying right
        after it may see it called again on the retry)."""

    async def on_turn_end(self, ctx: TurnContext, outcome: str) -> None:
        """Called when the turn ends: `completed`, `aborted` or `error` (at least once)."""

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        """Called before every recovery attempt. Return `RecoveryOptions(continue_=False)` to
        stop cleanly instead; an exception here means the default (recover)."""
        return RecoveryOptions()

    async def should_keep_recovering(self, ctx: ChatRecoveryContext) -> bool:
        """Asked before every recovery attempt of an incident but its first. False ends the
        turn with the terminal message (reason `recovery_aborted`); an exception, or running
        past `hook_timeout`, means keep recovering."""
        return True

    async def on_exhausted(self, ctx: ExhaustedContext) -> None:
        """Called when recovery gives up, before the terminal message is visible (at least
        once: a worker dying in between calls it again)."""

    async def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        """Settle a tool part that never got a result (its call was interrupted). The default
        records an error so the model knows, and the call is never silently re-run. Return the
        part with `state` `output-available` (and `output`) to record a result instead, or a
        text part (`{"type": "text", "text": ...}`) to say it in words: the call then keeps an
        errored result with that text (every provider needs each call answered), followed by
        the text. An exception, or running past `hook_timeout`, means the default."""
        return default_repair(part)

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        """Choose what a recovered turn continues from, and which queued follow-ups run after
        it and in what order (default: `ctx.default`)."""
        return ctx.default

    def fibers(self) -> dict[str, FiberDefinition]:
        found: dict[str, FiberDefinition] = {}
        for klass in reversed(type(self).__mro__):
            for member in vars(klass).values():
                definition = fiber_definition(member)
                if definition is not None:
                    found[definition.name] = definition
        return found

    async def on_fiber_complete(self, ctx: FiberContext, result: Any) -> None:
        """Called when a fiber of this agent completes, with its result (at least once: a
        worker dying right after it may see it called again)."""

    async def on_fiber_recovered(self, ctx: FiberContext) -> FiberRecovery | None:
        """Called before a fiber interrupted by a crash runs again, with `ctx.snapshot` (its
        last stash): reconnect to external work here. `ctx.stash()` works. Return None to run
        the method again, or a `FiberRecovery` to end the fiber now instead (`completed` with
        a result, `error`, `cancelled`; optionally with the snapshot it keeps). A failure or
        a timeout is logged and the fiber runs anyway."""
        return None
