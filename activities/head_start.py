"""A turn's first provider request, sent at intake through the provider relay, while the turn's
workflow boots (docs/relay.md, "Head start").

The request is planned as the first model step plans it (`activities/step_request.py`: the
agent's prompt, tools and limits, the session's active path) and sent by the same adapter, so
its body is byte for byte the step's own. The relay holds its stream; the step's request adopts
it when its body's digest is the same, and otherwise supersedes it (the early stream is
cancelled at the relay). Whatever happens here, the turn goes on as it would without: a head
start that cannot be planned or sent is skipped, and one no step adopts is cancelled.

Only a request that can be known before the step runs is sent early: not for an agent with an
`instructions` hook or MCP servers (their request needs the step's own calls), a request the
agent would compact first, a model whose adapter is not relayed, or a turn that waits in its
session's queue.
"""

import asyncio
import logging
from collections.abc import Coroutine
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from activities.client_tools import turn_client_tools
from activities.providers import ModelRequest, Provider, ProviderError
from activities.providers.config import ProviderConfig
from activities.providers.registry import provider_for
from activities.providers.relayed import cancel_relayed
from activities.step_request import StepPlan, conversation_before, over_compaction_threshold
from activities.turn_tools import local_tools
from activities.workspace_tools import WorkspaceTools
from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry, UnknownAgent
from perdure.domain.compaction import Overlaid
from perdure.domain.reducer import reduce_chunks
from perdure.domain.relay_protocol import CLAIM_SECONDS, CURSOR_PREFIX, stream_id_of
from perdure.domain.step_state import StepState, step_state
from perdure.domain.turn_chunks import start_chunk
from perdure.telemetry import metrics
from storage.intake import RecentPath
from storage.tables import SubmissionRow
from storage.timing import now

log = logging.getLogger(__name__)

SEND_SECONDS = 10.0
"""How long sending a head start may take, to the relay's answer; past it, it is dropped (the
relay cancels what it holds once no step claims it)."""
FIRST_STEP = 0
"""A fresh turn's first model step opens the log's step 0."""


def not_planned_early(agent: Agent) -> str | None:
    """Why the agent's first request cannot be known before its step runs; None if it can."""
    if type(agent).instructions is not Agent.instructions:
        return "its instructions come from a hook"
    if agent.mcp_servers:
        return "its MCP servers' tools are listed by the step"
    if not agent.head_start:
        return "the agent turned head starts off"
    return None


@dataclass
class HeadStart:
    """Per gateway process: sends each admitted turn's first request early, in the
    background (`start`), at most `limit` at once, and cancels it when the turn is stopped
    before its step adopted it (`cancel`)."""

    agents: AgentRegistry
    default_model: str
    config: ProviderConfig
    """The relay's address and secret; never a provider key (`early_config`)."""
    workspace: WorkspaceTools
    limit: int = 64
    _running: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self, submission: SubmissionRow, recent: RecentPath) -> None:
        """Send the submission's first request in the background, planned from its session's
        recent path as admitted; never raises."""
        if len(self._running) >= self.limit:
            return  # a burst: the steps send their own requests, as without a head start
        self._background(self._sent(submission, recent))

    def cancel(self, submission: SubmissionRow) -> None:
        """Cancel the submission's head start at the relay (its turn was stopped), in the
        background, while the relay may still hold one (whichever gateway sent it)."""
        if now() - submission.created_at > CLAIM_SECONDS:
            return
        stream_id = stream_id_of(submission.assistant_message_id, FIRST_STEP)
        self._background(self._cancelled(stream_id))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _cancelled(self, stream_id: str) -> None:
        try:
            await cancel_relayed(self.config, CURSOR_PREFIX + stream_id)
        except Exception as error:  # noqa: BLE001 - the relay cancels it once unclaimed
            log.info("head start %s not cancelled at the relay: %s", stream_id, error)

    def _provider(self, model: str) -> Provider:
        return provider_for(model, self.config)

    async def close(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _sent(self, submission: SubmissionRow, recent: RecentPath) -> None:
        try:
            async with asyncio.timeout(SEND_SECONDS):
                planned = self.plan(submission, recent)
                if planned is None:
                    return
                provider, request = planned
                await _send(provider, request)
            metrics.head_start("started")
        except (ProviderError, TimeoutError) as error:
            metrics.head_start(unsent_outcome(error))
            log.info("head start of %s not sent: %s", submission.id, error)
        except Exception:
            metrics.head_start("failed")
            log.exception("head start of %s failed", submission.id)

    def plan(
        self, submission: SubmissionRow, recent: RecentPath
    ) -> tuple[Provider, ModelRequest] | None:
        """The adapter and the request the turn's first step will send; None when it cannot
        be known now."""
        try:
            agent = self.agents.resolve(submission.agent)
        except UnknownAgent:
            return None
        if (reason := not_planned_early(agent)) is not None:
            log.debug("no head start for agent %s: %s", agent.name, reason)
            return None
        model = agent.model or self.default_model
        try:
            provider = self._provider(model)
        except ValueError:
            return None  # the step ends the turn with the error
        if not provider.relayed:
            return None
        if submission.boot_history is not None:
            return None
        tools = local_tools(agent, self.workspace)  # no MCP servers: see `not_planned_early`
        state = first_step_state(submission)
        plan = StepPlan(
            agent=agent,
            model=model,
            system=agent.system_prompt,
            tools=tools,
            client_tools=turn_client_tools(agent, submission, tools),
            state=state,
            resume=None,
            stream_id=stream_id_of(submission.assistant_message_id, FIRST_STEP),
        )
        conversation = conversation_before(
            recent.path, boot_history=None, state=state, message_id=submission.assistant_message_id
        )
        request = plan.request(Overlaid(recent.summary, conversation))
        if over_compaction_threshold(agent, request):
            return None  # the step compacts first: another request
        return provider, request.model_copy(update={"early": True})


def unsent_outcome(error: ProviderError | TimeoutError) -> str:
    """`late` when the relay holds the step's own stream already (`409 stream_taken`: the step
    was faster, nothing is lost), else `failed`."""
    return "late" if isinstance(error, ProviderError) and error.status == 409 else "failed"


def first_step_state(submission: SubmissionRow) -> StepState:
    """The first step of a fresh answer, as the step sees it once it opened it."""
    opened = [start_chunk(submission.assistant_message_id, submission.id), {"type": "start-step"}]
    return step_state(reduce_chunks(opened), FIRST_STEP)


async def _send(provider: Provider, request: ModelRequest) -> None:
    """Send it and leave: the relay reads the provider's answer on, for the step to adopt.

    The first event is awaited so that the relay's answer (a provider error, a refusal) is
    known here; the stream is closed after it, which the relay does not notice."""
    async with aclosing(provider.stream(request)) as events:
        async for _ in events:
            break


def early_config(config: ProviderConfig) -> ProviderConfig | None:
    """What a gateway sends head starts with: the relay's address and secret, never a provider
    key (a gateway that has one in its environment does not use it); None without a relay."""
    if config.relay_url is None or config.relay_secret is None:
        return None
    return config.model_copy(update={"openai_api_key": None, "anthropic_api_key": None})
