"""Record the histories the replay test checks: `python -m tests.histories.record NAME…`.

Record only new ones (each when TurnWorkflow changes on purpose, with a versioning plan for
running turns): the committed histories are what deployed workers recorded, and a worker must
still be able to replay them. `parked` was recorded when turns began to upsert their status.
"""

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import httpx
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from perdure.domain.names import turn_workflow_id
from perdure.domain.turn_labels import TURN_ATTRIBUTES
from perdure.runtime.temporal_dev import temporal_binary
from perdure.testing.chat_client import send
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.stack import running_stack
from tests.served import STACK_AGENTS

HERE = Path(__file__).parent
TURNS = {
    "tool_call": ('@tool calculate {"expression": "6*7"}', "default"),
    "recovered": ("@count 40 @delay 2 @disconnect_after 10 history", "default"),
    "exhausted": ("@count 30 @stall_after 4 @stall_after 0 x100 history", "observed-stalling"),
}


async def main(names: set[str]) -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
        search_attributes=TURN_ATTRIBUTES,
    )
    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(fake.env())
        directory = Path(tmp)
        async with running_stack(
            client=env.client,
            database_url=f"sqlite:///{directory}/p.db",
            data_dir=directory,
            agents=STACK_AGENTS,
        ) as stack:
            async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
                for name, (text, agent) in TURNS.items():
                    if name not in names:
                        continue
                    streamed = await send(http, f"history-{name}", text, agent=agent)
                    submission = streamed.headers["x-perdure-submission-id"]
                    await save(env, submission, name)
                if "stopped" in names:
                    await record_stopped(env, http)
                if "parked" in names:
                    await record_parked(env, http)
    await env.shutdown()


async def record_stopped(env: WorkflowEnvironment, http: httpx.AsyncClient) -> None:
    stop_task = asyncio.create_task(send(http, "history-stopped", "@count 300 @delay 10"))
    await asyncio.sleep(1.0)
    await http.post("/api/chat/history-stopped/stop")
    stopped = await stop_task
    await save(env, stopped.headers["x-perdure-submission-id"], "stopped")


async def record_parked(env: WorkflowEnvironment, http: httpx.AsyncClient) -> None:
    """Parks on an approval, is approved out of band, runs the tool and answers."""
    parked = await send(
        http, "history-parked", '@tool delete_file {"path": "notes/x.txt"}', agent="approvals"
    )
    approval = next(c for c in parked.chunks if c["type"] == "tool-approval-request")
    answered = await http.post(
        f"/v1/sessions/history-parked/approvals/{approval['approvalId']}", json={"approved": True}
    )
    answered.raise_for_status()
    await save(env, parked.headers["x-perdure-submission-id"], "parked")


async def save(env: WorkflowEnvironment, submission_id: str, name: str) -> None:
    handle = env.client.get_workflow_handle(turn_workflow_id(submission_id))
    for _ in range(100):
        if (await handle.describe()).status.name != "RUNNING":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.1)
    history = await handle.fetch_history()
    (HERE / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}")


ALL = {*TURNS, "stopped", "parked"}

if __name__ == "__main__":
    unknown = set(sys.argv[1:]) - ALL
    if not sys.argv[1:] or unknown:
        raise SystemExit(f"name the histories to record, of {sorted(ALL)}")
    asyncio.run(main(set(sys.argv[1:])))
