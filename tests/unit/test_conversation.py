"""Stored UI messages become the neutral conversation providers are sent."""

from perdure.domain.conversation import (
    AssistantItem,
    SignedReasoning,
    ToolCall,
    ToolResultItem,
    UserItem,
    to_conversation,
)
from perdure.domain.reducer import reduce_chunks
from perdure.domain.step_state import step_state
from perdure.domain.ui import UIMessage


def message(role: str, parts: list[dict[str, object]]) -> UIMessage:
    return UIMessage.model_validate({"id": f"{role}-1", "role": role, "parts": parts})


def test_a_multi_step_answer_becomes_calls_results_and_text() -> None:
    assistant = message(
        "assistant",
        [
            {"type": "step-start"},
            {
                "type": "tool-calculate",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"expression": "6*7"},
                "output": 42,
            },
            {"type": "step-start"},
            {"type": "text", "text": "It is 42."},
        ],
    )

    items = to_conversation([message("user", [{"type": "text", "text": "6*7?"}]), assistant])

    assert items == [
        UserItem(text="6*7?"),
        AssistantItem(
            tool_calls=[ToolCall(id="c1", name="calculate", arguments={"expression": "6*7"})]
        ),
        ToolResultItem(tool_call_id="c1", tool_name="calculate", output="42"),
        AssistantItem(text="It is 42."),
    ]


def test_a_failed_tool_call_is_reported_as_an_error_result() -> None:
    assistant = message(
        "assistant",
        [
            {
                "type": "tool-x",
                "toolCallId": "c",
                "state": "output-error",
                "input": {},
                "errorText": "no",
            },
        ],
    )

    items = to_conversation([assistant])

    assert items[1] == ToolResultItem(tool_call_id="c", tool_name="x", output="no", is_error=True)


def test_a_step_not_yet_started_has_no_prefill() -> None:
    state = step_state(reduce_chunks([{"type": "start"}]), 0)

    assert (state.started, state.prefill, state.open_text_id) == (False, None, None)


def test_an_interrupted_step_is_continued_from_its_text() -> None:
    log = [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}},
        {"type": "tool-output-available", "toolCallId": "c", "output": 1},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "s1-t1"},
        {"type": "text-delta", "id": "s1-t1", "delta": "1 2 3"},
    ]

    state = step_state(reduce_chunks(log), 1)

    assert state.started
    assert state.prefill == "1 2 3"
    assert state.open_text_id == "s1-t1"
    assert [p["type"] for p in state.prior_parts] == ["step-start", "tool-x"]


def test_signed_reasoning_goes_with_its_step_and_unsigned_reasoning_does_not() -> None:
    signed = {"anthropic": {"signature": "sig_1"}}
    assistant = message(
        "assistant",
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Look it up.", "providerMetadata": signed},
            {
                "type": "tool-lookup",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": "x",
            },
            {"type": "step-start"},
            {"type": "reasoning", "text": "cut off before its signature"},
            {"type": "text", "text": "Found x."},
        ],
    )

    first, _, last = to_conversation([assistant])

    assert isinstance(first, AssistantItem) and isinstance(last, AssistantItem)
    assert first.reasoning == [SignedReasoning(text="Look it up.", signature="sig_1")]
    assert last.reasoning == []


def test_an_openai_reasoning_item_goes_with_its_step_by_id() -> None:
    assistant = message(
        "assistant",
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "", "providerMetadata": {"openai": {"itemId": "rs_1"}}},
            {"type": "text", "text": "Hi."},
        ],
    )

    (item,) = to_conversation([assistant])

    assert isinstance(item, AssistantItem)
    assert item.reasoning == [SignedReasoning(item_id="rs_1")]
