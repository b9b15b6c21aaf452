"""Request dependencies as `Annotated` aliases."""

from typing import Annotated

from fastapi import Depends, Path, Request
from temporalio.client import Client

from gateway.errors import ApiError
from gateway.schemas.common import SESSION_ID_PATTERN
from gateway.temporal import GatewayDeadline
from perdure.runtime.services import Services
from perdure.runtime.settings import Settings
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.api_keys import KEY_PREFIX, any_stored_key, find_key
from storage.db import Database
from storage.log_watch import LogWatcher
from storage.sessions import get_session
from storage.tables import ChatSessionRow

# Async throughout: FastAPI runs a plain `def` dependency in a thread.


async def _services(request: Request) -> Services:
    """The one place the gateway reads the process's services; routes take only their parts."""
    services: Services = request.app.state.services
    return services


_ServicesDep = Annotated[Services, Depends(_services)]


async def _db(services: _ServicesDep) -> Database:
    return services.db


async def _temporal_client(services: _ServicesDep) -> Client:
    return services.client


async def _settings(services: _ServicesDep) -> Settings:
    return services.settings


async def _watcher(services: _ServicesDep) -> LogWatcher:
    return services.watcher


async def _eager_start(services: _ServicesDep) -> bool:
    return services.eager_start


DbDep = Annotated[Database, Depends(_db)]
TemporalDep = Annotated[Client, Depends(_temporal_client)]
SettingsDep = Annotated[Settings, Depends(_settings)]
WatcherDep = Annotated[LogWatcher, Depends(_watcher)]
"""This process's reader of the logs its SSE streams follow."""
EagerStartDep = Annotated[bool, Depends(_eager_start)]
"""True when a worker runs in this process on the same client (eager workflow start)."""


async def _lifecycle(request: Request, services: _ServicesDep) -> SubmissionLifecycle:
    """One per app: it keeps the background admissions it starts."""
    state = request.app.state
    lifecycle: SubmissionLifecycle | None = getattr(state, "lifecycle", None)
    if lifecycle is None:
        lifecycle = state.lifecycle = SubmissionLifecycle(
            services.db,
            services.client,
            task_queue=services.settings.task_queue,
            eager_start=services.eager_start,
            deadline=GatewayDeadline(services.client),
            bus=services.bus,
            intake_width=services.settings.intake_concurrency,
            head_start=services.head_start,
        )
    return lifecycle


LifecycleDep = Annotated[SubmissionLifecycle, Depends(_lifecycle)]
MAX_KEY = 200
"""Longer than any stored key (`pk_` and 43 characters): not looked up."""


async def _tenant(request: Request, db: DbDep, settings: SettingsDep) -> str:
    """Bearer key → its tenant: one of PERDURE_API_KEYS, or an active key in the store
    (`perdure keys create`), looked up by its hash on every request, so a revocation holds at
    once on every gateway. While neither source has a key (the store counts revoked ones too),
    there is no authentication: every caller is tenant `default`, and a key sent is ignored."""
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    presented = presented.strip()
    env_keys = settings.api_keys
    if scheme.lower() == "bearer" and presented:
        tenant = env_keys.tenant_for(presented) if env_keys is not None else None
        if tenant is not None:
            return tenant
        if presented.startswith(KEY_PREFIX) and len(presented) <= MAX_KEY:
            stored = await find_key(db, presented)
            if stored is not None and stored.revoked_at is None:
                return stored.tenant_id
    if env_keys is None and not await any_stored_key(db):
        return "default"
    raise _unauthorized()


def _unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "a valid 'Authorization: Bearer <key>' is required")


TenantDep = Annotated[str, Depends(_tenant)]
SessionIdPath = Annotated[
    str, Path(pattern=SESSION_ID_PATTERN, description="The session (chat) id, per tenant.")
]


def session_not_found(session_id: str) -> ApiError:
    return ApiError(404, "session_not_found", f"session {session_id!r} not found")


async def _owned_session(session_id: SessionIdPath, db: DbDep, tenant: TenantDep) -> ChatSessionRow:
    """The caller's tenant's session with the path's chat id; otherwise a 404."""
    session = await get_session(db, tenant_id=tenant, chat_id=session_id)
    if session is None:
        raise session_not_found(session_id)
    return session


OwnedSessionDep = Annotated[ChatSessionRow, Depends(_owned_session)]
