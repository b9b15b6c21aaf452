"""Every error leaves the gateway as JSON: `{"error": {"code": ..., "message": ...}}`."""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from storage.errors import MessageConflict, SessionNotFound


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **details}}


def _location(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ()) if part != "body")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(error.code, error.message, **error.details), status_code=error.status
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": _location(e), "message": str(e.get("msg", ""))} for e in error.errors()
        ]
        summary = "; ".join(f"{p['field'] or 'body'}: {p['message']}" for p in problems[:5])
        return JSONResponse(
            error_body("invalid_request", summary, problems=problems), status_code=422
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body("http_error", str(error.detail)),
            status_code=error.status_code,
            headers=getattr(error, "headers", None),
        )

    @app.exception_handler(SessionNotFound)
    async def _not_found(_: Request, error: SessionNotFound) -> JSONResponse:
        return JSONResponse(error_body(error.code, str(error)), status_code=404)

    @app.exception_handler(MessageConflict)
    async def _conflict(_: Request, error: MessageConflict) -> JSONResponse:
        return JSONResponse(error_body(error.code, str(error)), status_code=409)
