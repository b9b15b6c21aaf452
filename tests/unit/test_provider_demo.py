"""`demo`: the offline model is labelled, deterministic, and uses the calculator and clock tools."""

import pytest

from activities.providers.base import ModelRequest
from activities.providers.demo import DemoProvider
from perdure.domain.conversation import AssistantItem, ToolCall, ToolResultItem, ToolSpec, UserItem
from perdure.domain.provider_events import Finish, ToolCallEnd, ToolCallStart
from tests.fakeprovider_fixtures import collect, text_of

demo = DemoProvider(delay=0)
CALCULATE = ToolSpec(
    name="calculate",
    description="Evaluate arithmetic",
    parameters={"type": "object", "properties": {"expression": {"type": "string"}}},
)
CURRENT_TIME = ToolSpec(name="current_time", description="Now", parameters={"type": "object"})


def ask(text: str, **fields: object) -> ModelRequest:
    return ModelRequest(model="demo", conversation=[UserItem(text=text)], **fields)


def after_tool(text: str, call: ToolCall, output: str) -> ModelRequest:
    return ModelRequest(
        model="demo",
        tools=[CALCULATE, CURRENT_TIME],
        conversation=[
            UserItem(text=text),
            AssistantItem(tool_calls=[call]),
            ToolResultItem(tool_call_id=call.id, tool_name=call.name, output=output),
        ],
    )


async def test_echoes_the_user_with_a_clear_label() -> None:
    events = await collect(demo, ask("hello   there"))
    assert text_of(events) == "[demo model] You said: hello there"
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"


async def test_answers_are_deterministic() -> None:
    assert await collect(demo, ask("same")) == await collect(demo, ask("same"))


async def test_calls_calculate_for_an_expression_when_offered() -> None:
    events = await collect(demo, ask("what is 12*7?", tools=[CALCULATE]))
    start = events[0]
    assert isinstance(start, ToolCallStart) and start.name == "calculate"
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.arguments == {"expression": "12*7"}
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool-calls"


async def test_reports_the_calculation_result() -> None:
    call = ToolCall(id="d1", name="calculate", arguments={"expression": "3 + 4"})
    assert text_of(await collect(demo, after_tool("what is 3 + 4", call, "7"))) == (
        "[demo model] 3 + 4 = 7"
    )


async def test_does_not_call_a_tool_the_agent_does_not_offer() -> None:
    assert (
        text_of(await collect(demo, ask("what is 3 + 4"))) == "[demo model] You said: what is 3 + 4"
    )


async def test_asks_the_clock_for_the_time() -> None:
    events = await collect(demo, ask("What time is it?", tools=[CALCULATE, CURRENT_TIME]))
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert (end.name, end.arguments) == ("current_time", {})
    call = ToolCall(id=end.id, name="current_time")
    answer = text_of(await collect(demo, after_tool("What time is it?", call, "12:00 UTC")))
    assert answer == "[demo model] The current time is 12:00 UTC."


@pytest.mark.parametrize(
    "prefill", ["[demo model] You", "[demo model] You sa", "[demo model] You said: one "]
)
async def test_prefill_continuation_emits_only_the_remainder(prefill: str) -> None:
    events = await collect(demo, ask("one two three", prefill=prefill))
    assert prefill + text_of(events) == "[demo model] You said: one two three"
