"""Tool rounds a model step runs itself (activities/step_rounds.py): calls to idempotent tools
that wait for nobody run in the step, with no activity or workflow task between two model
requests; everything else runs as its own activity, as the agent's `step_tool_rounds` allows.
The answer, the log and the stored transcript are the same either way."""

import uuid
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType

from activities import model_step, step_rounds
from perdure.domain.names import MODEL_STEP_ACTIVITY, RUN_TOOL_ACTIVITY, turn_workflow_id
from perdure.testing.agents.chat import counted_runs
from perdure.testing.chat_client import Streamed, send
from perdure.testing.stack import Stack


def calls(tool: str, labels: list[str]) -> str:
    """One call per model request; then the model answers with what each returned."""
    return "\n".join(f'@tool {tool} {{"label": "{label}"}}' for label in labels)


def answer(tool: str, outputs: list[str]) -> str:
    """What the fake model answers once every call has returned (its script)."""
    return " ".join(f"Tool {tool} returned: {output}" for output in outputs)


def labels(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"{tag}-{i}" for i in range(n)]


async def activities_run(stack: Stack, streamed: Streamed) -> list[str]:
    """The activity types the turn's workflow scheduled, in order."""
    submission = streamed.headers["x-perdure-submission-id"]
    handle = stack.services.client.get_workflow_handle(turn_workflow_id(submission))
    return [
        event.activity_task_scheduled_event_attributes.activity_type.name
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def outputs(streamed: Streamed) -> list[Any]:
    return [c["output"] for c in streamed.chunks if c["type"] == "tool-output-available"]


async def stored_parts(http: httpx.AsyncClient, session: str) -> list[str]:
    messages = (await http.get(f"/api/chat/{session}/messages")).json()
    return [part["type"] for part in messages[-1]["parts"]]


async def test_calls_to_idempotent_tools_run_in_one_model_step(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session, names = f"rounds-{uuid.uuid4().hex[:8]}", labels(5)

    streamed = await send(http, session, calls("counted", names), agent="counting-tools")

    assert streamed.text() == answer("counted", [f"counted {name}" for name in names])
    assert outputs(streamed) == [f"counted {name}" for name in names]
    assert [name for name in counted_runs if name in names] == names  # each ran once
    assert await activities_run(stack, streamed) == [MODEL_STEP_ACTIVITY]
    parts = await stored_parts(http, session)
    assert parts.count("tool-counted") == 5 and parts.count("step-start") == 6


async def test_an_agent_without_step_rounds_runs_each_call_as_its_own_activity(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session, names = f"rounds-{uuid.uuid4().hex[:8]}", labels(3)

    streamed = await send(http, session, calls("counted", names), agent="tool-activities")

    assert streamed.text() == answer("counted", [f"counted {name}" for name in names])
    assert outputs(streamed) == [f"counted {name}" for name in names]
    assert await activities_run(stack, streamed) == [
        MODEL_STEP_ACTIVITY,
        RUN_TOOL_ACTIVITY,
    ] * 3 + [MODEL_STEP_ACTIVITY]


async def test_a_step_runs_no_more_rounds_than_its_agent_allows(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session, names = f"rounds-{uuid.uuid4().hex[:8]}", labels(5)

    streamed = await send(http, session, calls("counted", names), agent="two-rounds")

    assert streamed.text() == answer("counted", [f"counted {name}" for name in names])
    assert outputs(streamed) == [f"counted {name}" for name in names]
    # Two rounds in the step, the third call by the workflow; then again.
    assert await activities_run(stack, streamed) == [
        MODEL_STEP_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        MODEL_STEP_ACTIVITY,
    ]


async def test_a_non_idempotent_tool_is_run_by_the_workflow_once(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    session = f"rounds-{uuid.uuid4().hex[:8]}"

    streamed = await send(http, session, '@tool slow_refund {"order_id": "o-1"}', agent="default")

    assert streamed.text() == answer("slow_refund", ["refunded o-1"])
    assert outputs(streamed) == ["refunded o-1"]
    assert await activities_run(stack, streamed) == [
        MODEL_STEP_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        MODEL_STEP_ACTIVITY,
    ]


async def test_a_round_that_outlasts_its_bound_is_handed_to_the_workflow(
    stack: Stack, http: httpx.AsyncClient, monkeypatch: Any
) -> None:
    monkeypatch.setattr(step_rounds, "ROUND_TOOL_SECONDS", 0.2)
    session = f"rounds-{uuid.uuid4().hex[:8]}"

    streamed = await send(http, session, '@tool wait {"seconds": 0.5}', agent="default")

    assert streamed.text() == answer("wait", ["waited 0.5 s"])
    assert outputs(streamed) == ["waited 0.5 s"]
    assert await activities_run(stack, streamed) == [
        MODEL_STEP_ACTIVITY,
        RUN_TOOL_ACTIVITY,
        MODEL_STEP_ACTIVITY,
    ]


async def test_a_step_retried_after_its_round_was_logged_goes_on_with_the_next_request(
    stack: Stack, http: httpx.AsyncClient, monkeypatch: Any
) -> None:
    ran_round = model_step.run_round
    crashed: list[str] = []

    async def crash_once_logged(run: Any, tools: Any, calls: list[Any]) -> bool:
        ran = await ran_round(run, tools, calls)
        if not crashed:
            await run.writer.flush()
            crashed.append(calls[0].tool_call_id)
            raise RuntimeError("the worker died after logging the round")
        return ran

    monkeypatch.setattr(model_step, "run_round", crash_once_logged)
    session, names = f"rounds-{uuid.uuid4().hex[:8]}", labels(3)

    streamed = await send(http, session, calls("counted", names), agent="counting-tools")

    assert crashed
    assert streamed.text() == answer("counted", [f"counted {name}" for name in names])
    assert [name for name in counted_runs if name in names] == names  # none ran twice
    assert [c["type"] for c in streamed.chunks].count("data-recovery") == 1
