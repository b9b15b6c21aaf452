"""Agents the tests and benchmarks serve (PERDURE_AGENTS=perdure.testing.agents.chat): one per
provider API, and agents whose recovery policy and hooks the recovery specifications exercise."""

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perdure import (
    Agent,
    ChatRecoveryContext,
    ExhaustedContext,
    RecoveryBootContext,
    RecoveryOptions,
    RecoveryPolicy,
    TurnContext,
    stash,
    tool,
)
from perdure.default_agent import DefaultAgent
from perdure.domain.recovery_boot import RecoveryBoot
from perdure.domain.ui import UIMessage

QUICK = RecoveryPolicy(max_attempts=3, stall_timeout=timedelta(seconds=5))
"""Three attempts; a stall budget generous enough that a loaded CI machine (two lanes on two
cores, a long-lived test process's garbage collection) never adds a stall of its own to a test
that counts recoveries. Specifications of stalls use `StallingAgent`."""

recovery_contexts: list[ChatRecoveryContext] = []
exhausted_contexts: list[ExhaustedContext] = []


class WaitingTools:
    """A tools mixin (not an agent itself, so PERDURE_AGENTS does not serve it)."""

    @tool
    async def wait(self, seconds: float) -> str:
        """Wait, then answer (a tool that is still running when the user stops the turn)."""
        await asyncio.sleep(seconds)
        return f"waited {seconds} s"


class ChatCompletionsAgent(WaitingTools, DefaultAgent):
    name = "default"
    recovery = QUICK

    @tool(idempotent=False)
    async def slow_refund(self, order_id: str) -> str:
        """Refund an order (slowly). Each run is recorded in $PERDURE_TEST_TOOL_RUNS."""
        runs = os.environ.get("PERDURE_TEST_TOOL_RUNS")
        if runs:
            with Path(runs).open("a") as record:
                record.write(f"{order_id}\n")
        await asyncio.sleep(float(os.environ.get("PERDURE_TEST_TOOL_SECONDS", "0")))
        return f"refunded {order_id}"

    @tool
    async def remember(self, note: str) -> str:
        """Stash a note for recovery hooks."""
        await stash({"note": note})
        return "noted"


class StallingAgent(ChatCompletionsAgent):
    """`default`, for providers that go silent on purpose: half a second of silence is a stall."""

    name = "stalling"
    recovery = QUICK.model_copy(update={"stall_timeout": timedelta(milliseconds=500)})


class ResponsesAgent(WaitingTools, DefaultAgent):
    name = "responses"
    model = "openai-responses:gpt-fake"
    recovery = QUICK


class ReasoningResponsesAgent(ResponsesAgent):
    """A reasoning model on the Responses API, its reasoning summarized."""

    name = "responses-reasoning"
    model = "openai-responses:gpt-5.2"
    thinking_effort = "high"
    thinking_display = "summarized"


class AnthropicAgent(WaitingTools, DefaultAgent):
    """A prefill-era Claude (up to 4.5): a partial answer is continued by prefill."""

    name = "anthropic"
    model = "anthropic:claude-haiku-4-5"
    recovery = QUICK


class Claude46Agent(AnthropicAgent):
    """Claude 4.6: no prefill (continued by instruction); budget or adaptive thinking."""

    name = "claude-4-6"
    model = "anthropic:claude-sonnet-4-6"


class Claude47Agent(AnthropicAgent):
    """Today's Claude: no prefill, adaptive thinking only, thinking omitted by default."""

    name = "claude-4-7"
    model = "anthropic:claude-opus-4-7"


class ThinkingAgent(AnthropicAgent):
    """Extended thinking on: every answer starts with reasoning (the chat page shows it)."""

    name = "thinking"
    thinking_budget_tokens = 1024


class AdaptiveThinkingAgent(Claude47Agent):
    """Adaptive thinking at high effort, its summary shown (4.7 omits it by default)."""

    name = "thinking-4-7"
    thinking_effort = "high"
    thinking_display = "summarized"


class ObservedAgent(ChatCompletionsAgent):
    """Records every recovery and exhaustion context it is handed. Its stall budget is generous:
    the specifications that count its recoveries break streams on purpose, and a loaded CI
    machine must not add a stall of its own."""

    name = "observed"
    recovery = RecoveryPolicy(
        max_attempts=2,
        stall_timeout=timedelta(seconds=5),
        terminal_message="Sorry, I could not finish that answer.",
    )

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        recovery_contexts.append(ctx)
        return RecoveryOptions()

    async def on_exhausted(self, ctx: ExhaustedContext) -> None:
        exhausted_contexts.append(ctx)


class StallObservedAgent(ObservedAgent):
    """`observed`, for providers that go silent on purpose: half a second of silence is a stall."""

    name = "observed-stalling"
    recovery = ObservedAgent.recovery.model_copy(
        update={"stall_timeout": timedelta(milliseconds=500)}
    )


class QuitterAgent(ChatCompletionsAgent):
    """Declines to recover; keeps its partial only when the user text says `keep`."""

    name = "quitter"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        return RecoveryOptions(persist="keep" in str(ctx.last_body), continue_=False)


broken_hook_calls: list[str] = []
"""The incident ids `BrokenHookAgent`'s hooks were called for (before they raised)."""


class BrokenHookAgent(ChatCompletionsAgent):
    name = "broken-hook"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        broken_hook_calls.append(ctx.incident_id)
        raise RuntimeError("this hook is broken")

    async def should_keep_recovering(self, ctx: ChatRecoveryContext) -> bool:
        broken_hook_calls.append(f"keep:{ctx.incident_id}")
        raise RuntimeError("this predicate is broken")


keep_recovering_contexts: list[ChatRecoveryContext] = []


class GivesUpAgent(ChatCompletionsAgent):
    """Recovers once; `should_keep_recovering` declines every attempt after the first."""

    name = "gives-up"
    recovery = RecoveryPolicy(max_attempts=5, terminal_message="Given up.")

    async def should_keep_recovering(self, ctx: ChatRecoveryContext) -> bool:
        keep_recovering_contexts.append(ctx)
        return False


class ShortLivedAgent(ChatCompletionsAgent):
    """Never recovers a turn that started more than a second ago."""

    name = "short-lived"
    recovery = RecoveryPolicy(max_age=timedelta(seconds=1), terminal_message="Too old.")


recovery_gate: asyncio.Event | None = None
"""Armed by a specification that queues follow-ups behind a broken turn: the recovery of a
`HeldRecovery` agent waits in `on_chat_recovery` (before its boot plan reads the queue) until
the specification sets it, so the plan always sees them however loaded the machine is."""


# The type checker sees the mixin's place before an agent in the MRO; at run time it is no
# `Agent` subclass, so PERDURE_AGENTS does not serve it.
if TYPE_CHECKING:
    _HeldBase = Agent
else:
    _HeldBase = object


class HeldRecovery(_HeldBase):
    """A mixin (not an agent itself, so PERDURE_AGENTS does not serve it)."""

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        if recovery_gate is not None:
            await recovery_gate.wait()
        return await super().on_chat_recovery(ctx)


boot_contexts: list[RecoveryBootContext] = []
raising_hook_calls: list[str] = []


class RaisingEndingsAgent(HeldRecovery, ChatCompletionsAgent):
    """`on_exhausted` and `on_recovery_boot` both raise (after recording the call)."""

    name = "raising-endings"
    recovery = RecoveryPolicy(
        max_attempts=2, stall_timeout=timedelta(milliseconds=500), terminal_message="Ended."
    )

    async def on_exhausted(self, ctx: ExhaustedContext) -> None:
        raising_hook_calls.append("on_exhausted")
        raise RuntimeError("on_exhausted is broken")

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        raising_hook_calls.append("on_recovery_boot")
        raise RuntimeError("on_recovery_boot is broken")


class BootObserverAgent(HeldRecovery, ChatCompletionsAgent):
    """Records every recovery boot it is handed; keeps the default plan."""

    name = "boot-observer"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        boot_contexts.append(ctx)
        return ctx.default


class LastFollowUpOnlyAgent(HeldRecovery, ChatCompletionsAgent):
    """On a recovery boot, runs only the newest queued follow-up."""

    name = "last-follow-up-only"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        return ctx.default.model_copy(update={"follow_ups": ctx.default.follow_ups[-1:]})


def last_body_text(ctx: ChatRecoveryContext) -> str:
    parts: list[dict[str, Any]] = ctx.last_body.get("parts", [])
    return "".join(str(p.get("text", "")) for p in parts)


class SlowHooksAgent(ChatCompletionsAgent):
    """Hooks that take longer than the heartbeat timeout (5 s), but within `hook_timeout`."""

    name = "slow-hooks"
    hook_timeout = timedelta(seconds=20)

    async def instructions(self, ctx: TurnContext) -> str:
        await asyncio.sleep(6)
        return self.system_prompt

    async def on_turn_start(self, ctx: TurnContext) -> None:
        await asyncio.sleep(6)


turn_contexts: list[TurnContext] = []


class ContextRecordingAgent(ChatCompletionsAgent):
    """Records the context its turn-start hook receives."""

    name = "context-recording"

    async def on_turn_start(self, ctx: TurnContext) -> None:
        turn_contexts.append(ctx)


class HungInstructionsAgent(ChatCompletionsAgent):
    """`instructions()` that never answers within the agent's hook time limit."""

    name = "hung-instructions"
    hook_timeout = timedelta(seconds=1)

    async def instructions(self, ctx: TurnContext) -> str:
        await asyncio.sleep(30)
        return self.system_prompt


class HungTurnEndAgent(ChatCompletionsAgent):
    """`on_turn_end` that hangs: the turn must still end and release its session."""

    name = "hung-turn-end"
    hook_timeout = timedelta(seconds=1)

    async def on_turn_end(self, ctx: TurnContext, outcome: str) -> None:
        await asyncio.sleep(60)


class OneTokenAtATimeAgent(AnthropicAgent):
    """For a provider that dies after one more token on every attempt: only the turn's total
    budget (which progress never resets) can end it."""

    name = "one-token-at-a-time"
    recovery = RecoveryPolicy(
        max_attempts=3,
        max_total_attempts=4,
        stall_timeout=timedelta(seconds=1),
        terminal_message="Gave up after too many recoveries.",
    )


class HungExhaustedAgent(ChatCompletionsAgent):
    """Exhausts at once; its `on_exhausted` hangs past its time limit while the turn finishes."""

    name = "hung-exhausted"
    hook_timeout = timedelta(seconds=3)
    recovery = RecoveryPolicy(
        max_attempts=1,
        stall_timeout=timedelta(milliseconds=500),
        terminal_message="Could not finish.",
    )

    async def on_exhausted(self, ctx: ExhaustedContext) -> None:
        await asyncio.sleep(60)


counted_runs: list[str] = []


class CountingToolsAgent(ChatCompletionsAgent):
    """An idempotent tool that records each run (in this process)."""

    name = "counting-tools"

    @tool
    async def counted(self, label: str) -> str:
        """Record that it ran."""
        counted_runs.append(label)
        return f"counted {label}"


class ToolActivitiesAgent(CountingToolsAgent):
    """Every tool call runs as its own Temporal activity."""

    name = "tool-activities"
    step_tool_rounds = 0


class TwoRoundsAgent(CountingToolsAgent):
    """A model step runs at most two tool rounds itself."""

    name = "two-rounds"
    step_tool_rounds = 2


class LongToolLoopAgent(ChatCompletionsAgent):
    """Turns of up to 100 model steps, each tool round run in the step (the tool-round
    benchmark's agent)."""

    name = "long-tool-loop"
    max_steps = 100
    step_tool_rounds = 100


class LongToolLoopActivitiesAgent(LongToolLoopAgent):
    """`long-tool-loop` with every tool call as its own Temporal activity."""

    name = "long-tool-loop-activities"
    step_tool_rounds = 0


class PatientTurnsAgent(ChatCompletionsAgent):
    """Its policy aborts a stream silent for half a second; its turns allow three."""

    name = "patient-turns"
    recovery = RecoveryPolicy(max_attempts=3, stall_timeout=timedelta(milliseconds=500))

    async def stall_timeout(self, ctx: TurnContext) -> timedelta:
        return timedelta(seconds=3)


class DropsPartialAgent(ChatCompletionsAgent):
    """On a recovery boot, leaves the partial out: the model answers afresh."""

    name = "drops-partial"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        return ctx.default.model_copy(update={"chain": [*ctx.settled, ctx.in_flight_user]})


class SettlesPendingCallsAgent(ChatCompletionsAgent):
    """On a recovery boot, gives each pending tool call of the partial a synthesized result."""

    name = "settles-pending-calls"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        assert ctx.partial is not None and ctx.pending_tool_calls
        pending = {call.tool_call_id for call in ctx.pending_tool_calls}
        parts = [
            {**part.model_dump(), "state": "output-available", "output": "synthesized"}
            if part.model_dump().get("toolCallId") in pending
            else part.model_dump()
            for part in ctx.partial.parts
        ]
        settled = UIMessage.model_validate({**ctx.partial.model_dump(), "parts": parts})
        return ctx.default.model_copy(update={"chain": [*ctx.settled, ctx.in_flight_user, settled]})


BOOT_NOTE = "Note from the recovery boot: answer briefly."


class RewritesHistoryAgent(ChatCompletionsAgent):
    """On a recovery boot, puts a note before the conversation, for the rest of the turn."""

    name = "rewrites-history"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        note = UIMessage.model_validate(
            {"id": "boot-note", "role": "user", "parts": [{"type": "text", "text": BOOT_NOTE}]}
        )
        return ctx.default.model_copy(update={"chain": [note, *ctx.default.chain]})


class TokenBudgetAgent(CountingToolsAgent):
    """Any model step uses its whole token budget: a step that calls tools ends the turn."""

    name = "token-budget"
    max_turn_tokens = 1
    budget_message = "Out of tokens for this turn."


class OneStepAgent(CountingToolsAgent):
    """One model step a turn: its tool calls run, then the turn ends on its budget."""

    name = "one-step"
    max_steps = 1


class WorkspaceAgent(ChatCompletionsAgent):
    """Every built-in workspace tool (docs/workspace.md)."""

    name = "workspace"
    workspace_tools = True


class GuardedWorkspaceAgent(ChatCompletionsAgent):
    """The workspace tools, its changes waiting for a person's approval."""

    name = "workspace-guarded"
    workspace_tools = True
    workspace_approval = True


class SlowTurnStart:
    """A hooks mixin: `on_turn_start` takes a second, so that a turn's first step sends its
    request well after the gateway's head start of it, however loaded the machine."""

    async def on_turn_start(self, ctx: TurnContext) -> None:
        await asyncio.sleep(1.0)


class SlowStartAgent(SlowTurnStart, ChatCompletionsAgent):
    name = "slow-start"


class SlowStartClaudeAgent(SlowTurnStart, Claude47Agent):
    name = "slow-start-claude-4-7"


class DeployedPromptAgent(SlowTurnStart, ChatCompletionsAgent):
    """Its system prompt is read from `$PERDURE_TEST_SYSTEM_PROMPT` when the process starts:
    a gateway and a worker of two deploys of the agent disagree about its first request."""

    name = "deployed-prompt"
    system_prompt = os.environ.get("PERDURE_TEST_SYSTEM_PROMPT", "You are a helpful assistant.")
