"""A tool call whose result is recorded is never run again, whatever retries its activity."""

import dataclasses
import uuid

from temporalio.testing import ActivityEnvironment

from activities.mcp_toolbox import McpToolbox
from activities.tool_call import ToolCallActivity
from activities.turn_tools import ToolSources
from activities.workspace_tools import WorkspaceTools
from perdure.agents_registry import load_agents
from perdure.domain.payloads import RunToolInput, TurnRef
from perdure.runtime.settings import Settings
from perdure.testing.agents import chat as agents
from storage.bus import ChunkBus
from storage.chunks import LogWriter, append_chunks, load_log
from storage.db import Database
from storage.intake import submit
from tests.submitting import user_submission

TOOL_ACTIVITY_ID = "2"


async def test_a_retry_after_a_crash_that_followed_an_idempotent_tools_result_runs_it_not_again(
    store: Database,
) -> None:
    """The worker died after the tool's result was logged, before Temporal heard of it: the
    activity's next attempt finds the call settled and returns without running the tool."""
    label = uuid.uuid4().hex[:8]
    outcome = await submit(
        store,
        user_submission(
            f"settled-{label}", f"count {label}", key=f"settled-{label}", agent="counting-tools"
        ),
    )
    submission = outcome.submission
    message_id = submission.assistant_message_id
    await append_chunks(
        store,
        message_id=message_id,
        chunks=[
            {"type": "start", "messageId": message_id},
            {"type": "start-step"},
            {
                "type": "tool-input-available",
                "toolCallId": "call-1",
                "toolName": "counted",
                "input": {"label": label},
            },
        ],
        writer=LogWriter(key="activity:1", attempt=1),
    )
    await append_chunks(  # what the tool's first attempt logged before its worker died
        store,
        message_id=message_id,
        chunks=[{"type": "tool-output-available", "toolCallId": "call-1", "output": "counted"}],
        writer=LogWriter(key=f"activity:{TOOL_ACTIVITY_ID}", attempt=1),
    )
    logged = await load_log(store, message_id=message_id)
    tool = ToolCallActivity(
        db=store,
        bus=ChunkBus(reliable=False),
        agents=load_agents("perdure.testing.agents.chat"),
        toolbox=ToolSources(
            mcp=McpToolbox(),
            workspace=WorkspaceTools(db=store, limits=Settings().workspace_limits()),
        ),
    )
    retry = ActivityEnvironment()
    retry.info = dataclasses.replace(retry.info, activity_id=TOOL_ACTIVITY_ID, attempt=2)

    await retry.run(
        tool.run_tool,
        RunToolInput(
            turn=TurnRef(
                submission_id=submission.id,
                session_id=submission.session_id,
                assistant_message_id=message_id,
                agent="counting-tools",
            ),
            tool_call_id="call-1",
        ),
    )

    assert label not in agents.counted_runs
    assert await load_log(store, message_id=message_id) == logged
