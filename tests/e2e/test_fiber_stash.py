"""A fiber's stash replaces its snapshot whole, and only the attempt that owns it may write."""

import pytest

from perdure.domain.fiber_payloads import FiberKind
from storage.db import Database
from storage.fibers import StaleFiberAttempt, claim_fiber, load_fiber, record_fiber, stash_fiber

KIND = FiberKind(
    agent="fibers",
    name="count",
    max_age_seconds=3600,
    max_run_seconds=60,
    max_attempts=10,
    hook_timeout_seconds=10,
)


async def running_fiber(store: Database) -> str:
    recorded = await record_fiber(
        store, tenant_id="default", kind=KIND, payload={}, idempotency_key=None, metadata={}
    )
    claim = await claim_fiber(store, fiber_id=recorded.fiber.id, max_age_seconds=3600)
    assert claim is not None and claim.attempt == 1
    return recorded.fiber.id


async def test_a_stash_replaces_the_snapshot_whole_never_merging_it(store: Database) -> None:
    fiber_id = await running_fiber(store)
    await stash_fiber(store, fiber_id=fiber_id, attempt=1, snapshot={"a": 1, "b": 2})

    await stash_fiber(store, fiber_id=fiber_id, attempt=1, snapshot={"c": 3})

    row = await load_fiber(store, fiber_id)
    assert row is not None and row.snapshot == {"c": 3}


async def test_an_attempt_a_recovery_took_over_can_no_longer_stash(store: Database) -> None:
    """A paused old attempt that wakes up after its recovery started writes nothing."""
    fiber_id = await running_fiber(store)
    await stash_fiber(store, fiber_id=fiber_id, attempt=1, snapshot={"page": 3})
    recovery = await claim_fiber(store, fiber_id=fiber_id, max_age_seconds=3600)
    assert recovery is not None and recovery.outcome == "recover" and recovery.attempt == 2
    await stash_fiber(store, fiber_id=fiber_id, attempt=2, snapshot={"page": 4})

    with pytest.raises(StaleFiberAttempt):
        await stash_fiber(store, fiber_id=fiber_id, attempt=1, snapshot={"page": 99})

    row = await load_fiber(store, fiber_id)
    assert row is not None and row.snapshot == {"page": 4}
