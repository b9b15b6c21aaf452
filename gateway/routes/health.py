"""Liveness of the gateway's dependencies."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.deps import DbDep, TemporalDep
from gateway.schemas.health import Health

router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    summary="200 when Temporal and the store are reachable",
    responses={
        200: {"model": Health, "description": "Both answer"},
        503: {"model": Health, "description": "`checks` names what is unreachable"},
    },
)
async def healthz(db: DbDep, client: TemporalDep) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        await db.ping()
        checks["store"] = "ok"
    except Exception as error:  # noqa: BLE001 - reported, not raised
        checks["store"] = f"unreachable: {type(error).__name__}"
    try:
        await client.service_client.check_health()
        checks["temporal"] = "ok"
    except Exception as error:  # noqa: BLE001 - reported, not raised
        checks["temporal"] = f"unreachable: {type(error).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks},
        status_code=200 if healthy else 503,
    )
