"""An agent's concurrency strategy and debounce period are what the docs allow, or refused at
start; the workers record them for the gateway as declared."""

from datetime import timedelta

import pytest

from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry, served_concurrency
from perdure.domain.concurrency import Concurrency


def agent_with(**attributes: object) -> Agent:
    return type("Declared", (Agent,), {"name": "declared", **attributes})()


def test_a_debouncing_agent_is_recorded_with_its_period_in_milliseconds() -> None:
    agent = agent_with(concurrency="debounce", debounce=timedelta(seconds=2.5))

    assert served_concurrency(agent) == Concurrency("debounce", debounce_ms=2500)


def test_an_agent_debounces_for_a_second_unless_it_says_otherwise() -> None:
    assert served_concurrency(agent_with(concurrency="debounce")).debounce_ms == 1000


@pytest.mark.parametrize("period", [timedelta(0), timedelta(minutes=2), timedelta(seconds=-1)])
def test_a_debounce_period_outside_one_millisecond_to_a_minute_is_refused(
    period: timedelta,
) -> None:
    with pytest.raises(ValueError, match="debounce must be between 1 ms and 60 s"):
        AgentRegistry([agent_with(concurrency="debounce", debounce=period)])


def test_an_unknown_strategy_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="concurrency must be one of queue, reject"):
        AgentRegistry([agent_with(concurrency="coalesce")])


@pytest.mark.parametrize("strategy", ["merge", "debounce"])
def test_merge_and_debounce_take_the_queued_messages_over(strategy: str) -> None:
    assert Concurrency(strategy).absorbs_queued  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["queue", "latest", "drop", "interrupt"])
def test_other_strategies_leave_the_queued_messages_alone(strategy: str) -> None:
    assert not Concurrency(strategy).absorbs_queued  # type: ignore[arg-type]
