"""The gateway's HTTP API as the terminal client uses it: plain HTTP, no Perdure internals."""

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx

from perdure.commands.sse_events import EventReader, StreamEvent

DEFAULT_URL = "http://127.0.0.1:8000"
READ_TIMEOUT_SECONDS = 60.0
"""An open stream hears at least a keep-alive every 15 s; silence this long is a dead link."""


class GatewayError(Exception):
    """A request the gateway refused, said in one line (never its raw JSON)."""

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status


class Unreachable(GatewayError):
    """No answer: the gateway is down, or the connection dropped (a stream resumes)."""


def error_of(response: httpx.Response) -> GatewayError:
    """The one-line message of an error response: the gateway's `{"error": {code, message}}`
    (with a validation error's problems), else the status and the body's first line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        message = str(error["message"])
        problems = error.get("problems")
        if isinstance(problems, list) and problems:
            message += ": " + "; ".join(
                f"{problem.get('field')}: {problem.get('message')}"
                for problem in problems
                if isinstance(problem, dict)
            )
        code = str(error.get("code") or "error")
        return GatewayError(message, code=code, status=response.status_code)
    first_line = next(iter(response.text.strip().splitlines()), "") or response.reason_phrase
    return GatewayError(
        f"HTTP {response.status_code}: {first_line[:200]}", status=response.status_code
    )


class AnswerStream:
    """One open UI message stream (`POST /api/chat` or a resume)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._reader = EventReader()
        self.submission_id: str | None = response.headers.get("x-perdure-submission-id")

    def events(self) -> Iterator[StreamEvent]:
        return self._reader.events(self._response)

    @property
    def done(self) -> bool:
        """The server ended the stream (`[DONE]`); otherwise it dropped."""
        return self._reader.done


class Gateway:
    def __init__(self, url: str, api_key: str | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(30.0, read=READ_TIMEOUT_SECONDS),
        )

    def close(self) -> None:
        self._http.close()

    def _unreachable(self, error: httpx.TransportError) -> Unreachable:
        reason = str(error) or type(error).__name__
        return Unreachable(f"cannot reach the gateway at {self.url}: {reason}")

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of a request (None for a `204`); an error status raises."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        if response.status_code >= 400:
            raise error_of(response)
        return None if response.status_code == 204 else response.json()

    @contextlib.contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        last_event_id: str | None = None,
    ) -> Iterator[AnswerStream | None]:
        """An answer's stream; None when there is nothing to stream (a resume's `204`). A
        connection that fails or drops, opening or while it is read, raises `Unreachable`."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        try:
            with self._http.stream(method, path, json=body, headers=headers) as response:
                if response.status_code == 204:
                    yield None
                    return
                if response.status_code != 200:
                    response.read()
                    raise error_of(response)
                yield AnswerStream(response)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error

    def session(self, chat_id: str) -> dict[str, Any] | None:
        """The session, or None when the caller's tenant has no chat of that id."""
        try:
            found: dict[str, Any] = self.request("GET", f"/v1/sessions/{chat_id}")
        except GatewayError as error:
            if error.code == "session_not_found":
                return None
            raise
        return found
