"""Request dependencies as `Annotated` aliases."""

from typing import Annotated

from fastapi import Depends, Request

from gateway.errors import ApiError
from perdure.services import Services


async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]


async def _tenant(request: Request, services: ServicesDep) -> str:
    """Bearer key → tenant (PERDURE_API_KEYS); without keys configured, tenant `default`."""
    tenants = services.settings.tenants_by_key()
    if not tenants:
        return "default"
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    tenant = tenants.get(key.strip()) if scheme.lower() == "bearer" else None
    if tenant is None:
        raise ApiError(401, "unauthorized", "a valid 'Authorization: Bearer <key>' is required")
    return tenant


TenantDep = Annotated[str, Depends(_tenant)]
