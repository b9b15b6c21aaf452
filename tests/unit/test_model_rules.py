"""What each Claude generation accepts, and the agent options refused before any turn runs."""

import pytest

from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry
from perdure.domain.model_rules import (
    CLAUDE_4_5,
    CLAUDE_4_6,
    CLAUDE_4_7,
    OPENAI,
    ModelRules,
    ThinkingOptions,
    claude_rules,
    parse_families,
    refusals,
    rules_for,
)


@pytest.mark.parametrize(
    ("model", "rules"),
    [
        ("claude-haiku-4-5", CLAUDE_4_5),
        ("claude-sonnet-4-5-20250929", CLAUDE_4_5),
        ("claude-opus-4-20250514", CLAUDE_4_5),
        ("claude-3-7-sonnet-20250219", CLAUDE_4_5),
        ("claude-sonnet-4-6", CLAUDE_4_6),
        ("claude-opus-4-6", CLAUDE_4_6),
        ("claude-opus-4-7", CLAUDE_4_7),
        ("claude-opus-4-8", CLAUDE_4_7),
        ("claude-sonnet-5", CLAUDE_4_7),
        ("claude-opus-5-5", CLAUDE_4_7),
        ("claude-mythos-preview", CLAUDE_4_7),
        ("my-claude-finetune", CLAUDE_4_7),
    ],
)
def test_a_claude_model_id_gets_its_generations_rules(model: str, rules: ModelRules) -> None:
    assert claude_rules(model) == rules


def test_an_unknown_model_id_follows_the_family_it_is_given() -> None:
    families = parse_families("my-claude-finetune=claude-4.5, proxy-alias = claude-4.6")

    assert claude_rules("my-claude-finetune", families) == CLAUDE_4_5
    assert rules_for("anthropic:proxy-alias", families) == CLAUDE_4_6
    assert rules_for("openai:gpt-4.1-mini") == OPENAI
    assert rules_for("demo") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no-equals-sign", "is not model-id=family"),
        ("=claude-4.5", "is not model-id=family"),
        ("m=claude-9", "the family must be one of"),
    ],
)
def test_a_bad_model_family_entry_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_families(text)


def test_a_thinking_budget_is_refused_on_adaptive_only_models() -> None:
    (problem,) = refusals(CLAUDE_4_7, ThinkingOptions(budget_tokens=2048), 4096)

    assert "thinking_budget_tokens is not accepted by claude-4.7 models" in problem
    assert "use thinking_effort instead" in problem


def test_an_effort_is_refused_before_claude_4_6() -> None:
    (problem,) = refusals(CLAUDE_4_5, ThinkingOptions(effort="high"), 4096)

    assert problem == (
        "thinking_effort is not accepted by claude-4.5 models; use thinking_budget_tokens"
    )


def test_xhigh_is_refused_on_claude_4_6_and_accepted_from_4_7() -> None:
    assert refusals(CLAUDE_4_6, ThinkingOptions(effort="xhigh"), 4096) == [
        "thinking_effort 'xhigh' is not accepted by claude-4.6 models "
        "(they take low, medium, high, max)"
    ]
    assert refusals(CLAUDE_4_7, ThinkingOptions(effort="xhigh"), 4096) == []


@pytest.mark.parametrize(
    ("thinking", "problem"),
    [
        (ThinkingOptions(budget_tokens=512), "thinking_budget_tokens must be at least 1024"),
        (ThinkingOptions(budget_tokens=4096), "must be below max_output_tokens"),
        (ThinkingOptions(display="summarized"), "thinking_display needs thinking"),
        (ThinkingOptions(budget_tokens=2048, effort="low"), "not both"),
    ],
)
def test_thinking_options_the_api_would_refuse_are_named(
    thinking: ThinkingOptions, problem: str
) -> None:
    assert any(problem in found for found in refusals(CLAUDE_4_6, thinking, 4096))


def test_openai_models_take_no_thinking_options_from_perdure_yet() -> None:
    assert refusals(OPENAI, ThinkingOptions(effort="high"), 4096) == [
        "thinking_effort is not accepted by openai models"
    ]


class _BudgetOnOpus47(Agent):
    name = "budgeted"
    model = "anthropic:claude-opus-4-7"
    thinking_budget_tokens = 2048


class _AdaptiveOnDefault(Agent):
    name = "adaptive"
    thinking_effort = "high"


def test_the_worker_refuses_an_agent_whose_model_would_answer_every_message_with_a_400() -> None:
    agents = AgentRegistry([_BudgetOnOpus47()])

    with pytest.raises(ValueError, match="agent 'budgeted' on anthropic:claude-opus-4-7"):
        agents.check_models("demo", {})


def test_an_agent_without_a_model_is_checked_against_the_default_model() -> None:
    agents = AgentRegistry([_AdaptiveOnDefault()])

    agents.check_models("anthropic:claude-sonnet-4-6", {})  # accepted
    with pytest.raises(ValueError, match="on anthropic:claude-haiku-4-5"):
        agents.check_models("anthropic:claude-haiku-4-5", {})


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4.1-mini", "openai"),
        ("gpt-4o", "openai"),
        ("o3", "openai-o"),
        ("o4-mini", "openai-o"),
        ("gpt-5", "openai-gpt-5"),
        ("gpt-5-mini", "openai-gpt-5"),
        ("gpt-5.1", "openai-gpt-5.1"),
        ("gpt-5.2", "openai-gpt-5.2"),
        ("gpt-5.5-pro", "openai-gpt-5.2"),
        ("gpt-fake", "openai-gpt-5.2"),
    ],
)
def test_an_openai_model_id_gets_its_reasoning_rules(model: str, family: str) -> None:
    rules = rules_for(f"openai-responses:{model}")

    assert rules is not None and rules.family == family


def test_an_effort_is_refused_on_an_openai_model_without_reasoning() -> None:
    rules = rules_for("openai:gpt-4.1-mini")
    assert rules is not None

    assert refusals(rules, ThinkingOptions(effort="low"), 4096) == [
        "thinking_effort is not accepted by openai models"
    ]


def test_xhigh_is_refused_before_gpt_5_2() -> None:
    rules = rules_for("openai:gpt-5")
    assert rules is not None

    (problem,) = refusals(rules, ThinkingOptions(effort="xhigh"), 4096)

    assert "(they take low, medium, high)" in problem


def test_a_reasoning_summary_is_a_responses_feature() -> None:
    summarized = ThinkingOptions(effort="high", display="summarized")
    responses, chat = rules_for("openai-responses:gpt-5.2"), rules_for("openai:gpt-5.2")
    assert responses is not None and chat is not None

    assert refusals(responses, summarized, 4096) == []
    assert refusals(chat, summarized, 4096) == [
        "thinking_display is not accepted by openai-gpt-5.2 models through this API"
    ]
