"""The chat page (sources in web/, built into gateway/static/ by `make web`): its index.html at
`/`, its content-hashed files under `/assets`. Nothing else is served from the bundle, so the
page never shadows a route of the API."""

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
"""Only the gateway's own files and API: an answer's Markdown cannot load (or report to) any
other site, and the page cannot be framed."""


class _Assets(StaticFiles):
    """A content-hashed file never changes under its name, so browsers may keep it."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def install_web(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    async def chat_page() -> FileResponse:
        # Revalidated on every load: a new build's index.html names new asset files.
        return FileResponse(
            STATIC / "index.html",
            headers={
                "Cache-Control": "no-cache",
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            },
        )

    app.mount("/assets", _Assets(directory=STATIC / "assets"), name="web-assets")
