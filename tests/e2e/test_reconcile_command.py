"""`perdure reconcile` runs the reconciler once now on the configured task queue and prints its
report; without a worker to run it, it says so within its timeout (docs/operations.md)."""

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import inherited_environment
from perdure.testing.stack import Stack

REPO = Path(__file__).parents[2]
REPORT_FIELDS = {
    "started",
    "closed",
    "stops_resent",
    "fibers_started",
    "fibers_settled",
    "pruned_logs",
    "swept_blobs",
}


def environment(stack: Stack, tmp_path: Path, task_queue: str) -> dict[str, str]:
    return {
        **inherited_environment(),
        "PYTHONPATH": str(REPO),
        "PERDURE_DATA_DIR": str(tmp_path),
        "PERDURE_DATABASE_URL": stack.settings.resolved_database_url(),
        "PERDURE_TASK_QUEUE": task_queue,
        "TEMPORAL_ADDRESS": stack.services.client.service_client.config.target_host,
    }


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_it_prints_the_report_of_the_run_a_worker_carried_out(
    stack: Stack, spawner: ProcessSpawner, tmp_path: Path
) -> None:
    env = environment(stack, tmp_path, stack.settings.task_queue)

    done = await asyncio.to_thread(spawner.run, ["reconcile"], env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == REPORT_FIELDS


@pytest.mark.parametrize("stack", ["sqlite"], indirect=True)
async def test_without_a_worker_it_says_so_once_its_timeout_has_passed(
    stack: Stack, spawner: ProcessSpawner, tmp_path: Path
) -> None:
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    env = environment(stack, tmp_path, queue)

    done = await asyncio.to_thread(spawner.run, ["reconcile", "--timeout", "1"], env, cwd=tmp_path)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"perdure: the reconciler run did not end within 1 s: is a worker of task queue "
        f"{queue!r} running?"
    )


@pytest.mark.parametrize("value", ["0", "-3", "soon", "86401"])
def test_a_timeout_that_is_no_number_of_seconds_is_refused(
    value: str, spawner: ProcessSpawner, tmp_path: Path
) -> None:
    done = spawner.run(["reconcile", "--timeout", value], inherited_environment(), cwd=tmp_path)

    assert done.returncode == 2
    assert "--timeout" in done.stderr and "Traceback" not in done.stderr
