"""From what the log and the recovery decided to the provider request: pure, no I/O.

A model step reads the store and runs the agent's hooks first; what it sends then follows from
those results alone: which conversation (the active path, a recovery boot plan's history, the
step's earlier parts), whether to re-attach to a resumable response or continue a prefill, and
the agent's tools and limits.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from activities.providers import ModelRequest, ResumeToken
from perdure.agent import Agent
from perdure.domain.compaction import Overlaid, estimate_tokens, with_summary
from perdure.domain.conversation import to_conversation
from perdure.domain.step_state import StepState
from perdure.domain.ui import UIMessage
from perdure.tools import ClientTool, Tool


def conversation_before(
    path: list[UIMessage],
    *,
    boot_history: list[UIMessage] | None,
    state: StepState,
    message_id: str,
) -> list[UIMessage]:
    """What the model is shown before this step: a recovery boot plan's history if one holds
    for the turn (else the active path), then the answer's earlier steps."""
    history = list(boot_history if boot_history is not None else path)
    if state.prior_parts:
        history.append(
            UIMessage.model_validate(
                {"id": message_id, "role": "assistant", "parts": state.prior_parts}
            )
        )
    return history


def resume_token(
    *, supports_resume: bool, cursor: dict[str, Any] | None, log_step: int
) -> ResumeToken | None:
    """Re-attach to the provider's response of this very step, when the provider keeps one."""
    if not supports_resume or not cursor or cursor.get("step") != log_step:
        return None
    return ResumeToken(response_id=cursor["response_id"], sequence_number=cursor["sequence_number"])


@dataclass(frozen=True)
class StepPlan:
    """What every request of the step shares; `request(seen)` makes one for a conversation
    (the first, or a compacted one)."""

    agent: Agent
    model: str
    """The model spec (`openai:gpt-4.1-mini`): what spans and metrics name."""
    system: str
    tools: Mapping[str, Tool]
    client_tools: dict[str, ClientTool]
    state: StepState
    resume: ResumeToken | None
    stream_id: str
    """The step's identity at the provider relay (`stream_id_of`): the same on every attempt."""

    @property
    def provider_model(self) -> str:
        """The provider's own name for the model (`gpt-4.1-mini`)."""
        return self.model.split(":", 1)[-1]

    def request(self, seen: Overlaid) -> ModelRequest:
        return ModelRequest(
            model=self.provider_model,
            system=with_summary(self.system, seen.summary),
            conversation=to_conversation(seen.recent),
            tools=[definition.spec for definition in self.tools.values()]
            + [client_tool.spec for client_tool in self.client_tools.values()]
            + [sub_agent.spec for sub_agent in self.agent.sub_agents],
            # A re-attached response goes on by itself; otherwise the step's text so far.
            prefill=None if self.resume else self.state.prefill,
            resume=self.resume,
            stream_id=self.stream_id,
            max_output_tokens=self.agent.max_output_tokens,
            thinking=self.agent.thinking(),
        )


def over_compaction_threshold(agent: Agent, request: ModelRequest) -> bool:
    """The agent compacts a request this long before sending it (`compact_after_tokens`)."""
    threshold = agent.compact_after_tokens
    return threshold is not None and estimate_tokens(request.system, request.conversation) > (
        threshold
    )
