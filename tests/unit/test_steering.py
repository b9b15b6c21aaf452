"""Steering messages in an answer: how they are written, what the model is shown, and what
the gateway refuses to steer with."""

import pytest
from pydantic import ValidationError

from gateway.schemas.chat import ChatRequest
from gateway.schemas.submissions import SubmissionCreate
from perdure.agent import Agent
from perdure.agents_registry import served_concurrency
from perdure.domain.concurrency import Concurrency
from perdure.domain.conversation import (
    AssistantItem,
    ToolCall,
    ToolResultItem,
    UserItem,
    to_conversation,
)
from perdure.domain.reducer import reduce_chunks
from perdure.domain.steering import steer_chunks, steered_submissions
from perdure.domain.ui import UIMessage

STEERING = {"id": "u-2", "role": "user", "parts": [{"type": "text", "text": "use metres"}]}


def tool_step_then_steering() -> list[dict[str, object]]:
    return [
        {"type": "start", "messageId": "a-1"},
        {"type": "start-step"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "measure", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": "12 ft"},
        {"type": "finish-step"},
        *steer_chunks("s-2", [STEERING]),
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "3.66 m"},
        {"type": "text-end", "id": "t"},
        {"type": "finish-step"},
    ]


def test_a_steering_message_is_a_user_turn_after_the_tool_results_it_follows() -> None:
    parts = reduce_chunks(tool_step_then_steering()).parts
    question = UIMessage.model_validate(
        {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "how long?"}]}
    )

    items = to_conversation(
        [question, UIMessage.model_validate({"id": "a-1", "role": "assistant", "parts": parts})]
    )

    assert items == [
        UserItem(text="how long?"),
        AssistantItem(tool_calls=[ToolCall(id="c1", name="measure", arguments={})]),
        ToolResultItem(tool_call_id="c1", tool_name="measure", output="12 ft"),
        UserItem(text="use metres"),
        AssistantItem(text="3.66 m"),
    ]


def test_the_stored_answer_keeps_the_steering_message_where_it_joined() -> None:
    parts = reduce_chunks(tool_step_then_steering()).parts

    types = [part["type"] for part in parts]

    assert types == ["step-start", "tool-measure", "data-steer", "step-start", "text"]
    assert parts[2]["data"] == {"submissionId": "s-2", "message": STEERING}


def test_the_log_names_the_submissions_that_joined_once_each_in_order() -> None:
    chunks = [
        *steer_chunks("s-2", [STEERING]),
        *steer_chunks("s-3", [{**STEERING, "id": "u-3"}, {**STEERING, "id": "u-4"}]),
    ]

    assert steered_submissions(chunks) == ["s-2", "s-3"]


def test_an_agent_may_steer_by_default() -> None:
    agent = type("Steered", (Agent,), {"name": "steered", "concurrency": "steer"})()

    assert served_concurrency(agent) == Concurrency("steer")
    assert served_concurrency(agent).steers


def chat_body(**extra: object) -> dict[str, object]:
    return {"id": "c", "messages": [{"id": "u-1", "role": "user", "parts": []}], **extra}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"trigger": "regenerate-message"}, "a regenerate"),
        ({"messageId": "u-1"}, "an edit"),
        (
            {"tools": [{"name": "pick", "description": "d", "parameters": {"type": "object"}}]},
            "client `tools`",
        ),
    ],
)
def test_steering_with_what_goes_back_or_brings_its_own_tools_is_refused(
    extra: dict[str, object], named: str
) -> None:
    with pytest.raises(ValidationError, match=named):
        ChatRequest.model_validate(chat_body(concurrency="steer", **extra))


def test_steering_a_continue_is_refused() -> None:
    with pytest.raises(ValidationError, match="continueLastTurn"):
        SubmissionCreate.model_validate({"continueLastTurn": True, "concurrency": "steer"})
