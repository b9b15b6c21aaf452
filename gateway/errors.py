"""Every error leaves the gateway as JSON: `{"error": {"code", "message", "requestId", ...}}`.

An unreachable store or Temporal is a `503` with `Retry-After`; anything unexpected is a `500`
that says nothing about the internals (the log has the details, under the request id).
"""

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.service import RPCError

from gateway.body_limits import BodyTooLarge
from gateway.request_id import current_request_id
from perdure.runtime.temporal_setup import SETUP_COMMAND, search_attributes_missing
from perdure.turn_control.fair_gate import IntakeBusy
from perdure.turn_control.rpc import TRANSIENT_RPC_STATUSES
from storage.branches import MessageNotFound, SessionExists
from storage.busy_session import SessionBusy
from storage.errors import (
    BlobMissing,
    FileNotFound,
    FileTooLarge,
    MessageConflict,
    StoreError,
    SubmissionConflict,
    VersionConflict,
    WorkspaceFull,
)

log = logging.getLogger("perdure.gateway")

RETRY_AFTER_SECONDS = 5
"""What a 503 tells the client to wait before it retries."""
STORE_UNAVAILABLE = "store_unavailable"
TEMPORAL_UNAVAILABLE = "temporal_unavailable"
TEMPORAL_SETUP_REQUIRED = "temporal_setup_required"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.details = details


def unavailable(code: str, message: str) -> ApiError:
    return ApiError(503, code, message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def store_unreachable(error: BaseException) -> bool:
    """The store could not be reached or dropped the connection (not a bad statement)."""
    if isinstance(
        error,
        sa_exc.OperationalError
        | sa_exc.InterfaceError
        | sa_exc.TimeoutError
        | sa_exc.DisconnectionError,
    ):
        return True
    return isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated


def temporal_unreachable(error: BaseException) -> bool:
    return isinstance(error, RPCError) and error.status in TRANSIENT_RPC_STATUSES


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "error": {"code": code, "message": message, **details, "requestId": current_request_id()}
    }


def error_response(
    status: int, code: str, message: str, *, headers: dict[str, str] | None = None, **details: Any
) -> JSONResponse:
    return JSONResponse(error_body(code, message, **details), status_code=status, headers=headers)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]


def response_for(error: Exception, request: str = "") -> JSONResponse:
    """The JSON answer to an exception that no route turned into an `ApiError`; `request`
    (method and path) goes to the log with the request id."""
    if isinstance(error, ApiError):
        return error_response(
            error.status, error.code, error.message, headers=error.headers, **error.details
        )
    if isinstance(error, BodyTooLarge):  # read outside FastAPI's body parsing
        return error_response(413, "body_too_large", str(error))
    request_id = f"{current_request_id()} {request}".strip()
    if store_unreachable(error):
        log.warning("store unreachable (request %s): %s", request_id, _first_line(error))
        return store_unavailable_response()
    if search_attributes_missing(error):
        log.error(
            "Temporal refused a turn (request %s): %s; run `%s`",
            request_id,
            _first_line(error),
            SETUP_COMMAND,
        )
        return unavailable_response(
            TEMPORAL_SETUP_REQUIRED,
            "Temporal is not set up for Perdure (its search attributes are missing); nothing "
            f"was changed. An operator must run `{SETUP_COMMAND}`, then retry.",
        )
    if temporal_unreachable(error):
        log.warning("Temporal unreachable (request %s): %s", request_id, _first_line(error))
        return unavailable_response(
            TEMPORAL_UNAVAILABLE, "Temporal cannot be reached; nothing was changed. Retry shortly."
        )
    log.error("unexpected error (request %s)", request_id, exc_info=error)
    return error_response(
        500,
        "internal_error",
        "An unexpected error occurred. Quote the request id if you report it.",
    )


def store_unavailable_response() -> JSONResponse:
    return unavailable_response(
        STORE_UNAVAILABLE, "The store cannot be reached; nothing was changed. Retry shortly."
    )


def unavailable_response(code: str, message: str) -> JSONResponse:
    error = unavailable(code, message)
    return error_response(error.status, error.code, error.message, headers=error.headers)


class InvalidField(ValueError):
    """Raised by a model validator that checks fields together: the 422 names `field` (its wire
    name), as it names a field that fails on its own."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def invalid_request(error: InvalidField) -> ApiError:
    """The 422 of a check made after validation, in the shape validation gives."""
    return ApiError(
        422,
        "invalid_request",
        f"{error.field}: {error}",
        problems=[{"field": error.field, "message": str(error)}],
    )


def _problem(error: Any) -> dict[str, str]:
    """A validation error as the 422 lists it: the field (dotted, as sent), and the message."""
    cause = (error.get("ctx") or {}).get("error")
    location = [str(part) for part in error.get("loc", ()) if part != "body"]
    if isinstance(cause, InvalidField):
        return {"field": ".".join([*location, cause.field]), "message": str(cause)}
    message = str(error.get("msg", ""))
    if isinstance(cause, ValueError):
        message = str(cause) or message  # without pydantic's "Value error, " prefix
    return {"field": ".".join(location), "message": message}


def validation_response(errors: Sequence[Any]) -> JSONResponse:
    """The one answer to a body, path or query that does not validate: a 400 for a body that
    is not JSON, else a 422 naming each invalid field."""
    for error in errors:
        if error.get("type") == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            return error_response(
                400, "malformed_json", f"the request body is not valid JSON: {detail}"
            )
    problems = [_problem(error) for error in errors]
    summary = "; ".join(f"{p['field'] or 'body'}: {p['message']}" for p in problems[:5])
    return error_response(422, "invalid_request", summary, problems=problems)


def install_error_handlers(app: FastAPI) -> None:
    """Every failure a route lets out answers in the error shape: the API's own refusals and
    the framework's, the store's refusals by kind, and an unreachable store or Temporal."""
    _install_request_handlers(app)
    _install_store_refusals(app)
    _install_dependency_failures(app)


def _install_request_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return response_for(error)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return validation_response(error.errors())

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        if isinstance(error.__cause__, BodyTooLarge):  # FastAPI wraps what its read raised
            return error_response(413, "body_too_large", str(error.__cause__))
        return error_response(
            error.status_code,
            _HTTP_CODES.get(error.status_code, "http_error"),
            str(error.detail),
            headers=getattr(error, "headers", None),
        )

    @app.exception_handler(IntakeBusy)
    async def _busy(_: Request, error: IntakeBusy) -> JSONResponse:
        return response_for(
            unavailable("intake_busy", f"the gateway is busy with other submissions: {error}")
        )


def _install_store_refusals(app: FastAPI) -> None:
    @app.exception_handler(BlobMissing)
    async def _no_blob(_: Request, error: StoreError) -> JSONResponse:
        # A volume not mounted yet, say: retrying may find it.
        return error_response(
            503, error.code, str(error), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
        )

    @app.exception_handler(FileNotFound)
    async def _no_file(_: Request, error: StoreError) -> JSONResponse:
        return error_response(404, error.code, str(error))

    @app.exception_handler(VersionConflict)
    async def _stale(_: Request, error: StoreError) -> JSONResponse:
        return error_response(412, error.code, str(error))

    @app.exception_handler(FileTooLarge)
    @app.exception_handler(WorkspaceFull)
    async def _too_large(_: Request, error: StoreError) -> JSONResponse:
        return error_response(413, error.code, str(error))

    @app.exception_handler(MessageNotFound)
    async def _not_found(_: Request, error: StoreError) -> JSONResponse:
        return error_response(404, error.code, str(error))

    @app.exception_handler(MessageConflict)
    @app.exception_handler(SubmissionConflict)
    @app.exception_handler(SessionBusy)
    @app.exception_handler(SessionExists)
    async def _conflict(_: Request, error: StoreError) -> JSONResponse:
        return error_response(409, error.code, str(error))


def _install_dependency_failures(app: FastAPI) -> None:
    """The store or Temporal failing: a 503 when it is unreachable (`response_for`)."""

    @app.exception_handler(sa_exc.SQLAlchemyError)
    async def _store(request: Request, error: sa_exc.SQLAlchemyError) -> JSONResponse:
        return response_for(error, f"{request.method} {request.url.path}")

    @app.exception_handler(RPCError)
    async def _temporal(request: Request, error: RPCError) -> JSONResponse:
        return response_for(error, f"{request.method} {request.url.path}")
