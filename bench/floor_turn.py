"""The workflow and worker of `bench.temporal_floor`, in a module the workflow sandbox can
re-import (nothing here but Temporal).

    python -m bench.floor_turn ADDRESS [--unsandboxed]    # serve the worker
"""

import asyncio
import sys
import time
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

QUEUE = "temporal-floor"


@activity.defn(name="floor_step")
async def floor_step() -> float:
    return time.monotonic()


@activity.defn(name="floor_finish")
async def floor_finish() -> None:
    return None


@workflow.defn(name="FloorTurn")
class FloorTurn:
    @workflow.run
    async def run(self, local_finish: bool) -> float:
        started = await workflow.execute_activity(
            floor_step,
            start_to_close_timeout=timedelta(minutes=1),
            heartbeat_timeout=timedelta(seconds=5),
        )
        if local_finish:
            await workflow.execute_local_activity(
                floor_finish, start_to_close_timeout=timedelta(seconds=30)
            )
        else:
            await workflow.execute_activity(
                floor_finish, start_to_close_timeout=timedelta(seconds=30)
            )
        return started


async def serve_worker(address: str, sandboxed: bool) -> None:
    client = await Client.connect(address)
    worker = Worker(
        client,
        task_queue=QUEUE,
        workflows=[FloorTurn],
        activities=[floor_step, floor_finish],
        max_concurrent_activities=1000,
        **({} if sandboxed else {"workflow_runner": UnsandboxedWorkflowRunner()}),
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(serve_worker(sys.argv[1], sandboxed="--unsandboxed" not in sys.argv))
