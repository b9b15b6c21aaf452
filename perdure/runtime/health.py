"""What a health probe checks: the store and Temporal, both at once, each within its bound.

A dependency cut off without a reset (packets dropped) never answers: a probe that waited for it
would hang as long as the partition, and a load balancer or an orchestrator would go on trusting
the process. Each check is given up after `CHECK_SECONDS`, so the answer comes within that bound
whatever the dependencies do, and names what did not answer.
"""

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from temporalio.client import Client

from storage.abandoned import finished_within
from storage.db import Database

CHECK_SECONDS = 2.0

OK = "ok"


async def _check(probe: Coroutine[Any, Any, object]) -> str:
    checked = await finished_within(probe, CHECK_SECONDS)
    if checked is None:
        return f"unreachable: no answer within {CHECK_SECONDS:g} s"
    if (error := checked.exception()) is not None:
        return f"unreachable: {type(error).__name__}"
    return OK


async def dependency_checks(db: Database, client: Client) -> dict[str, str]:
    """`{"store": …, "temporal": …}`, each `"ok"` or why not; within `CHECK_SECONDS`."""
    store, temporal = await asyncio.gather(
        _check(db.ping()),
        _check(client.service_client.check_health(timeout=timedelta(seconds=CHECK_SECONDS))),
    )
    return {"store": store, "temporal": temporal}


def healthy(checks: dict[str, str]) -> bool:
    return all(value == OK for value in checks.values())
