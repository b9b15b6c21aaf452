"""Request dependencies as `Annotated` aliases."""

from typing import Annotated

from fastapi import Depends, Path, Request

from gateway.errors import ApiError
from gateway.schemas import SESSION_ID_PATTERN
from runtime.services import Services
from storage.sessions import get_session
from storage.tables import ChatSession


async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]


async def _tenant(request: Request, services: ServicesDep) -> str:
    """Bearer key → tenant (PERDURE_API_KEYS); without keys configured, tenant `default`."""
    keys = services.settings.api_keys
    if keys is None:
        return "default"
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    tenant = keys.tenant_for(presented.strip())
    if scheme.lower() != "bearer" or tenant is None:
        raise ApiError(401, "unauthorized", "a valid 'Authorization: Bearer <key>' is required")
    return tenant


TenantDep = Annotated[str, Depends(_tenant)]
SessionIdPath = Annotated[
    str, Path(pattern=SESSION_ID_PATTERN, description="The session (chat) id.")
]


def session_not_found(session_id: str) -> ApiError:
    return ApiError(404, "session_not_found", f"session {session_id!r} not found")


async def _owned_session(
    session_id: SessionIdPath, services: ServicesDep, tenant: TenantDep
) -> ChatSession:
    """The path's session, if it belongs to the caller's tenant; otherwise a 404."""
    session = await get_session(services.db, tenant_id=tenant, session_id=session_id)
    if session is None:
        raise session_not_found(session_id)
    return session


OwnedSessionDep = Annotated[ChatSession, Depends(_owned_session)]
