"""Agents the tests serve (PERDURE_AGENTS=tests.agents): one per provider API, and agents
whose recovery policy and hooks the recovery specifications exercise."""

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from domain.recovery_boot import RecoveryBoot
from perdure import (
    ChatRecoveryContext,
    ExhaustedContext,
    RecoveryBootContext,
    RecoveryOptions,
    RecoveryPolicy,
    stash,
    tool,
)
from perdure.default_agent import DefaultAgent

QUICK = RecoveryPolicy(max_attempts=3, stall_timeout=timedelta(seconds=1))

recovery_contexts: list[ChatRecoveryContext] = []
exhausted_contexts: list[ExhaustedContext] = []


class ChatCompletionsAgent(DefaultAgent):
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


class ResponsesAgent(DefaultAgent):
    name = "responses"
    model = "openai-responses:gpt-fake"
    recovery = QUICK


class AnthropicAgent(DefaultAgent):
    name = "anthropic"
    model = "anthropic:claude-fake"
    recovery = QUICK


class ObservedAgent(ChatCompletionsAgent):
    """Records every recovery and exhaustion context it is handed."""

    name = "observed"
    recovery = RecoveryPolicy(
        max_attempts=2,
        stall_timeout=timedelta(milliseconds=500),
        terminal_message="Sorry, I could not finish that answer.",
    )

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        recovery_contexts.append(ctx)
        return RecoveryOptions()

    async def on_exhausted(self, ctx: ExhaustedContext) -> None:
        exhausted_contexts.append(ctx)


class QuitterAgent(ChatCompletionsAgent):
    """Declines to recover; keeps its partial only when the user text says `keep`."""

    name = "quitter"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        return RecoveryOptions(persist="keep" in str(ctx.last_body), continue_=False)


class BrokenHookAgent(ChatCompletionsAgent):
    name = "broken-hook"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> RecoveryOptions:
        raise RuntimeError("this hook is broken")


class LastFollowUpOnlyAgent(ChatCompletionsAgent):
    """On a recovery boot, runs only the newest queued follow-up."""

    name = "last-follow-up-only"

    async def on_recovery_boot(self, ctx: RecoveryBootContext) -> RecoveryBoot:
        return ctx.default.model_copy(update={"follow_ups": ctx.default.follow_ups[-1:]})


def last_body_text(ctx: ChatRecoveryContext) -> str:
    parts: list[dict[str, Any]] = ctx.last_body.get("parts", [])
    return "".join(str(p.get("text", "")) for p in parts)
