"""Liveness of the gateway's dependencies, answered within a bound whatever they do."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.deps import DbDep, TemporalDep
from gateway.schemas.health import Health
from perdure.runtime.health import dependency_checks, healthy

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    summary="200 when Temporal and the store answer, within 2 s either way",
    responses={
        200: {"model": Health, "description": "Both answer"},
        503: {"model": Health, "description": "`checks` names what did not answer, and why"},
    },
)
async def healthz(db: DbDep, client: TemporalDep) -> JSONResponse:
    checks = await dependency_checks(db, client)
    ok = healthy(checks)
    return JSONResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks},
        status_code=200 if ok else 503,
    )
