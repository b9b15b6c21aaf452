"""Which calls a model step runs itself (activities/step_rounds.py), and the agent's option."""

from typing import Any

import pytest

from activities.step_rounds import STEP_ROUNDS_SECONDS, calls_for_the_step
from perdure import Agent, tool
from perdure.agents_registry import AgentRegistry
from perdure.domain.payloads import ModelStepResult, ToolCallRef


class Tooled(Agent):
    name = "tooled"
    step_tool_rounds = 3

    @tool
    async def look(self, key: str) -> str:
        """Look a key up."""
        return key


def result(*calls: ToolCallRef, next_step: int = 1, **fields: Any) -> ModelStepResult:
    return ModelStepResult(
        finish_reason="tool-calls",
        tool_calls=list(calls),
        max_steps=10,
        next_step=next_step,
        **fields,
    )


def call(name: str = "look", **fields: Any) -> ToolCallRef:
    return ToolCallRef(tool_call_id=f"call-{name}", tool_name=name, **fields)


def in_step(made: ModelStepResult, *, rounds: int = 0, elapsed: float = 0.0) -> bool:
    agent = Tooled()
    chosen = calls_for_the_step(agent, agent.tools(), made, rounds=rounds, elapsed=elapsed)
    return chosen is not None


def test_calls_to_idempotent_tools_that_wait_for_nobody_run_in_the_step() -> None:
    assert in_step(result(call(), call()))


@pytest.mark.parametrize(
    "other",
    [
        call(wait="approval"),
        call(wait="client"),
        call(sub_agent="helper"),
        call(idempotent=False),
        call("unknown_tool"),
    ],
    ids=["approval", "client", "sub-agent", "not idempotent", "unknown tool"],
)
def test_one_call_the_workflow_must_run_sends_all_of_the_step_s_calls_there(
    other: ToolCallRef,
) -> None:
    assert not in_step(result(call(), other))


def test_a_step_without_calls_has_no_round() -> None:
    assert not in_step(result())


def test_the_agent_s_rounds_per_step_bound_them() -> None:
    assert in_step(result(call()), rounds=2)
    assert not in_step(result(call()), rounds=3)


def test_the_last_step_s_calls_are_left_to_the_workflow() -> None:
    assert not in_step(result(call(), next_step=10))


def test_a_step_past_its_time_for_rounds_takes_no_more() -> None:
    assert not in_step(result(call()), elapsed=STEP_ROUNDS_SECONDS)


def test_a_turn_over_its_token_budget_takes_no_round() -> None:
    assert not in_step(result(call(), budget_reached=True))


@pytest.mark.parametrize("rounds", [-1, True, 2.5, "3"])
def test_step_tool_rounds_must_be_a_whole_number_of_at_least_0(rounds: object) -> None:
    agent = type("Odd", (Tooled,), {"name": "odd", "step_tool_rounds": rounds})()

    with pytest.raises(ValueError, match="step_tool_rounds must be a whole number"):
        AgentRegistry([agent])


def test_step_tool_rounds_of_0_is_accepted() -> None:
    agent = type("Off", (Tooled,), {"name": "off", "step_tool_rounds": 0})()

    assert AgentRegistry([agent]).resolve("off").step_tool_rounds == 0
