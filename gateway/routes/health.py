"""Liveness of the gateway's dependencies, answered within a bound whatever they do."""

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.deps import DbDep, TemporalDep
from gateway.schemas.health import Health
from storage.abandoned import finished_within

router = APIRouter(tags=["health"])

CHECK_SECONDS = 2.0
"""Each check's bound. A dependency cut off without a reset (packets dropped) never answers:
a probe that waited for it would hang as long as the partition, and a load balancer would keep
sending users to this gateway. Both checks run at once, so the answer comes within this bound."""


async def _check(probe: Coroutine[Any, Any, object]) -> str:
    checked = await finished_within(probe, CHECK_SECONDS)
    if checked is None:
        return f"unreachable: no answer within {CHECK_SECONDS:g} s"
    if (error := checked.exception()) is not None:
        return f"unreachable: {type(error).__name__}"
    return "ok"


@router.get(
    "/healthz",
    summary="200 when Temporal and the store answer, within 2 s either way",
    responses={
        200: {"model": Health, "description": "Both answer"},
        503: {"model": Health, "description": "`checks` names what did not answer, and why"},
    },
)
async def healthz(db: DbDep, client: TemporalDep) -> JSONResponse:
    store, temporal = await asyncio.gather(
        _check(db.ping()),
        _check(client.service_client.check_health(timeout=timedelta(seconds=CHECK_SECONDS))),
    )
    checks = {"store": store, "temporal": temporal}
    healthy = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status_code=200 if healthy else 503,
    )
