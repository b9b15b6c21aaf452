"""Access at the gateway: who may submit what (allowed agents, rate limits, token budgets) and
which browser origins may call it (CORS). Authentication itself is in gateway/deps.py."""

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware

from gateway.errors import error_response
from gateway.request_id import REQUEST_ID_HEADER
from perdure.runtime.settings import Settings
from storage.db import Database
from storage.errors import AgentNotAllowed, BudgetExhausted, RateLimited
from storage.tenant_policies import TenantLimits, limits_for

CORS_REQUEST_HEADERS = [
    "Authorization",
    "Content-Type",
    "Idempotency-Key",
    "Last-Event-ID",
    REQUEST_ID_HEADER,
]
CORS_EXPOSED_HEADERS = [
    "x-perdure-submission-id",
    "x-perdure-temporal-url",
    "x-vercel-ai-ui-message-stream",
    REQUEST_ID_HEADER,
    "Retry-After",
]
CORS_MAX_AGE_SECONDS = 600


async def tenant_limits(
    db: Database, settings: Settings, tenant: str, agent: str | None = None
) -> TenantLimits:
    """The tenant's policy, read now; an agent the request names is refused at once (the agent
    a submission runs, its session's, is checked again when it is recorded)."""
    checked = await limits_for(db, tenant, settings.rate_limit)
    if agent is not None:
        checked.check_agent(agent)
    return checked


def install_access(app: FastAPI, settings: Settings) -> None:
    """403 and 429 in the usual error shape, and CORS when PERDURE_CORS_ORIGINS is set: the
    outermost middleware, so error responses carry its headers too."""

    @app.exception_handler(AgentNotAllowed)
    async def _agent(_: Request, error: AgentNotAllowed) -> JSONResponse:
        return error_response(403, error.code, str(error))

    @app.exception_handler(RateLimited)
    @app.exception_handler(BudgetExhausted)
    async def _rate(_: Request, error: RateLimited | BudgetExhausted) -> JSONResponse:
        return error_response(
            429,
            error.code,
            str(error),
            headers={"Retry-After": str(error.retry_after)},
            retryAfterSeconds=error.retry_after,
        )

    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_credentials=settings.cors_credentials,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=CORS_REQUEST_HEADERS,
            expose_headers=CORS_EXPOSED_HEADERS,
            max_age=CORS_MAX_AGE_SECONDS,
        )
