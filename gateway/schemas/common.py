"""What every resource shares: the id patterns and the `{"error": …}` body."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SESSION_ID_PATTERN = r"^[A-Za-z0-9_\-.:]{1,200}$"


AGENT_PATTERN = r"^[A-Za-z0-9_\-.]{1,200}$"


class Problem(BaseModel):
    field: str
    message: str


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    code: str = Field(description="What went wrong, for programs: e.g. `invalid_request`.")
    message: str = Field(description="What went wrong, for people.")
    requestId: str = Field(  # noqa: N815 - wire name
        description="The request's id (also the `X-Request-ID` header): quote it in reports."
    )
    problems: list[Problem] | None = Field(
        default=None, description="Each invalid field (validation errors only)."
    )


class ErrorResponse(BaseModel):
    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorResponse, "description": "The request was refused; nothing changed"},
    "5XX": {
        "model": ErrorResponse,
        "description": "503 with `Retry-After`: Temporal or the store is unreachable, retry "
        "later; 500: an unexpected error, reported under its request id",
    },
}
