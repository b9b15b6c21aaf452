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
async def floor_step(stream_seconds: float) -> float:
    """Stamps its start; then, like a streaming model step, heartbeats every second (from 1 s
    in, as Perdure's do) for `stream_seconds`."""
    started = time.monotonic()
    while time.monotonic() - started + 1.0 <= stream_seconds:
        await asyncio.sleep(1.0)
        activity.heartbeat()
    await asyncio.sleep(max(0.0, stream_seconds - (time.monotonic() - started)))
    # A retried attempt (its heartbeats reached Temporal too late) reports a negative stamp.
    return started if activity.info().attempt == 1 else -started


@activity.defn(name="floor_finish")
async def floor_finish() -> None:
    return None


@workflow.defn(name="FloorTurn")
class FloorTurn:
    @workflow.run
    async def run(self, local_finish: bool, stream_seconds: float) -> float:
        started = await workflow.execute_activity(
            floor_step,
            stream_seconds,
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
