"""What the two OpenAI routes share: JSON error bodies and how stream faults look."""

from starlette.responses import JSONResponse

from perdure.testing.fakeprovider.directives import Fault
from perdure.testing.fakeprovider.gate import Rejection
from perdure.testing.fakeprovider.player import StreamFault


def _type_and_code(status: int) -> tuple[str, str | None]:
    if status == 429:
        return "requests", "rate_limit_exceeded"
    if status == 401:
        return "invalid_request_error", "invalid_api_key"
    if status == 404:
        return "invalid_request_error", "not_found"
    if status >= 500:
        return "server_error", None
    return "invalid_request_error", None


def openai_error(rejection: Rejection) -> JSONResponse:
    """`{"error": {"message", "type", "param", "code"}}`, OpenAI's error body."""
    kind, code = _type_and_code(rejection.status)
    body = {
        "error": {
            "message": rejection.message,
            "type": kind,
            "param": rejection.param,
            "code": rejection.code or code,
        }
    }
    return JSONResponse(body, status_code=rejection.status, headers=rejection.headers)


def openai_stream_fault(fault: Fault | None) -> StreamFault | None:
    """OpenAI streams get no mid-stream error event here: a mid-stream error drops the connection."""
    if fault is None:
        return None
    return StreamFault(after=fault.after, action="stall" if fault.kind == "stall" else "abort")
