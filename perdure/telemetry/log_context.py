"""The ids of the work being done, for log lines: request, tenant, session and submission.

Each is a context variable, so it follows the request or activity that set it (and the tasks
it starts) and nothing else. The gateway binds the request id for every request and the others
where it knows them; the worker binds them for every activity whose input names them.
"""

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar, Token
from typing import Any

from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

REQUEST_ID: ContextVar[str | None] = ContextVar("perdure_request_id", default=None)
TENANT_ID: ContextVar[str | None] = ContextVar("perdure_tenant_id", default=None)
SESSION_ID: ContextVar[str | None] = ContextVar("perdure_session_id", default=None)
"""The session's storage key (`sessions.id`), as the worker knows it too; not the chat id."""
SUBMISSION_ID: ContextVar[str | None] = ContextVar("perdure_submission_id", default=None)

_FIELDS: dict[str, ContextVar[str | None]] = {
    "request_id": REQUEST_ID,
    "tenant_id": TENANT_ID,
    "session_id": SESSION_ID,
    "submission_id": SUBMISSION_ID,
}


def current_ids() -> dict[str, str]:
    """The ids bound here, by field name (`request_id`, `tenant_id`, …); unbound ones left out."""
    found: dict[str, str] = {}
    for name, variable in _FIELDS.items():
        value = variable.get()
        if value is not None:
            found[name] = value
    return found


def bind_ids(
    *, tenant_id: str | None = None, session_id: str | None = None, submission_id: str | None = None
) -> None:
    """Bind the given ids for the rest of the current context (a request, an activity)."""
    for variable, value in (
        (TENANT_ID, tenant_id),
        (SESSION_ID, session_id),
        (SUBMISSION_ID, submission_id),
    ):
        if value is not None:
            variable.set(value)


@contextlib.contextmanager
def bound_ids(
    *, tenant_id: str | None = None, session_id: str | None = None, submission_id: str | None = None
) -> Iterator[None]:
    """Bind the given ids for the block, then restore what was bound before."""
    tokens: list[tuple[ContextVar[str | None], Token[str | None]]] = []
    for variable, value in (
        (TENANT_ID, tenant_id),
        (SESSION_ID, session_id),
        (SUBMISSION_ID, submission_id),
    ):
        if value is not None:
            tokens.append((variable, variable.set(value)))
    try:
        yield
    finally:
        for variable, token in reversed(tokens):
            variable.reset(token)


RequestScope = tuple[tuple[ContextVar[str | None], Token[str | None]], ...]
"""What `open_request` replaced, for `close_request` to put back."""


def open_request(request_id: str) -> RequestScope:
    """A request starts: its id is bound and no id of an earlier request's work stays bound
    (an in-process ASGI transport runs requests in its caller's context)."""
    return tuple(
        (variable, variable.set(request_id if variable is REQUEST_ID else None))
        for variable in _FIELDS.values()
    )


def close_request(scope: RequestScope) -> None:
    for variable, token in reversed(scope):
        variable.reset(token)


def _id_of(args: Any, name: str) -> str | None:
    """The id as an argument names it, or as its `turn` does (a turn's payloads)."""
    for arg in args:
        for holder in (arg, getattr(arg, "turn", None)):
            value = getattr(holder, name, None)
            if isinstance(value, str):
                return value
    return None


class LogContextInterceptor(Interceptor):
    """Binds the session and submission ids named by an activity's input (every turn activity's
    payload carries them) while the activity runs."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _BoundActivity(next)


class _BoundActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        with bound_ids(
            tenant_id=_id_of(input.args, "tenant_id"),
            session_id=_id_of(input.args, "session_id"),
            submission_id=_id_of(input.args, "submission_id"),
        ):
            return await self.next.execute_activity(input)
