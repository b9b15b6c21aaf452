"""Record the histories the replay test checks: `python -m tests.histories.record`.

Run it again only when TurnWorkflow changes on purpose (with a versioning plan for running
turns); the committed histories are what a deployed worker must still be able to replay.
"""

import asyncio
import os
import tempfile
from pathlib import Path

import httpx
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from domain.names import turn_workflow_id
from runtime.temporal_dev import temporal_binary
from tests.e2e.chat_client import send
from tests.fakeprovider.server import FakeProvider
from tests.stack import running_stack

HERE = Path(__file__).parent
TURNS = {
    "tool_call": ('@tool calculate {"expression": "6*7"}', "default"),
    "recovered": ("@count 40 @delay 2 @disconnect_after 10 history", "default"),
    "exhausted": ("@count 30 @stall_after 4 @stall_after 0 x100 history", "observed"),
}


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
    )
    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(fake.env())
        directory = Path(tmp)
        async with running_stack(
            client=env.client, database_url=f"sqlite:///{directory}/p.db", data_dir=directory
        ) as stack:
            async with httpx.AsyncClient(base_url=stack.url, timeout=60) as http:
                for name, (text, agent) in TURNS.items():
                    streamed = await send(http, f"history-{name}", text, agent=agent)
                    submission = streamed.headers["x-perdure-submission-id"]
                    await save(env, submission, name)
                stop_task = asyncio.create_task(
                    send(http, "history-stopped", "@count 300 @delay 10")
                )
                await asyncio.sleep(1.0)
                await http.post("/api/chat/history-stopped/stop")
                stopped = await stop_task
                await save(env, stopped.headers["x-perdure-submission-id"], "stopped")
    await env.shutdown()


async def save(env: WorkflowEnvironment, submission_id: str, name: str) -> None:
    handle = env.client.get_workflow_handle(turn_workflow_id(submission_id))
    for _ in range(100):
        if (await handle.describe()).status.name != "RUNNING":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.1)
    history = await handle.fetch_history()
    (HERE / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}")


if __name__ == "__main__":
    asyncio.run(main())
