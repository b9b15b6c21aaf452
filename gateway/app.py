"""The FastAPI application."""

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.routing import APIRoute

from gateway.access import install_access
from gateway.body_limits import BodyLimitMiddleware
from gateway.errors import install_error_handlers
from gateway.middleware import RequestIdMiddleware
from gateway.routes import (
    branches,
    chat,
    fibers,
    files,
    health,
    metrics,
    prompt_schedules,
    sessions,
    submissions,
    usage,
    waits,
)
from gateway.schemas.common import ERROR_RESPONSES
from gateway.store_deadline import StoreDeadlineMiddleware
from gateway.web import install_web
from perdure.runtime.services import Services, open_services
from perdure.runtime.settings import Settings
from perdure.telemetry.tracing import instrument_app
from storage.reachability import StoreProbe
from storage.urls import is_sqlite


def _operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def create_app(*, services: Services | None = None, settings: Settings | None = None) -> FastAPI:
    """With `services`, serve on them (as `perdure dev` does); otherwise open our own."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if services is not None:
                yield
                return
            async with open_services(settings or Settings()) as own:
                app.state.services = own
                yield
        finally:
            if probe is not None:
                await probe.close()

    settings = services.settings if services is not None else settings or Settings()
    url = settings.resolved_database_url()
    probe = None if is_sqlite(url) else StoreProbe(url)
    app = FastAPI(
        title="Perdure",
        summary="Durable AI-chat agents on Temporal",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        responses=ERROR_RESPONSES,
    )
    app.add_middleware(BodyLimitMiddleware, settings=settings)
    app.add_middleware(StoreDeadlineMiddleware, probe=probe)
    app.add_middleware(RequestIdMiddleware)  # outermost: the 503s above carry the request id
    if services is not None:
        app.state.services = services
    install_error_handlers(app)
    install_access(app, settings)
    app.include_router(chat.router)
    app.include_router(sessions.router)
    app.include_router(submissions.router)
    app.include_router(branches.router)
    app.include_router(waits.router)
    app.include_router(prompt_schedules.router)
    app.include_router(fibers.router)
    app.include_router(usage.router)
    app.include_router(files.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    install_web(app)
    instrument_app(app)  # traced when tracing is on (telemetry/tracing.py)
    return app
