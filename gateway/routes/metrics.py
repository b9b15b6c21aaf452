"""`GET /metrics`: Prometheus's text format, for scrapers (not part of the API's schema).

It takes no tenant API key: a scraper cannot send one, and the metrics are aggregates of the
whole process with no tenant, session or message in them. `PERDURE_METRICS_TOKEN` makes it
ask for `Authorization: Bearer <token>` instead.
"""

from typing import Annotated

from fastapi import APIRouter, Header, Response

from gateway.deps import DbDep, SettingsDep
from perdure.telemetry import queue_depth
from perdure.telemetry.metrics import authorized, exposition

router = APIRouter(tags=["metrics"])


@router.get("/metrics", include_in_schema=False)
async def metrics(
    db: DbDep, settings: SettingsDep, authorization: Annotated[str | None, Header()] = None
) -> Response:
    token = settings.metrics_token
    if not authorized(authorization, token.get_secret_value() if token else None):
        return Response(
            "metrics need Authorization: Bearer <PERDURE_METRICS_TOKEN>\n",
            status_code=401,
            media_type="text/plain",
            headers={"WWW-Authenticate": "Bearer"},
        )
    await queue_depth.refresh(db, task_queue=settings.task_queue)
    body, content_type = exposition()
    return Response(body, media_type=content_type)
