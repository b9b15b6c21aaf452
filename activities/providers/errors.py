"""Classify SDK and transport failures as `ProviderError`s for Temporal's retry policy.

408, 409, 429, 5xx, dropped connections and timeouts are retryable; other 4xx are not.
A 400 that mentions prefill marks `prefill_rejected`, so the caller regenerates the step.
"""

import email.utils
import sys
import time
from collections.abc import Mapping
from typing import Any, cast

import httpx
import httpx2
import openai

from activities.providers.base import ProviderError

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_RETRYABLE_ERROR_TYPES = frozenset(
    {
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
        "server_error",
        "rate_limit_exceeded",
    }
)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`retry-after-ms`, else `retry-after` as seconds or an HTTP date; None if absent or bad."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _body_message(body: object) -> str | None:
    """`error.message` from an OpenAI or Anthropic JSON error body."""
    if isinstance(body, Mapping):
        error: Any = body.get("error", body)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
    return None


def _body_error_type(body: object) -> str | None:
    """`type`, with `code` when it says more (OpenAI: `invalid_request_error` /
    `context_length_exceeded`)."""
    if isinstance(body, Mapping):
        error: Any = body.get("error", body)
        if isinstance(error, Mapping):
            kinds = [str(error[k]) for k in ("type", "code") if error.get(k) is not None]
            return " / ".join(dict.fromkeys(kinds)) or None
    return None


def from_status(
    provider: str,
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    error_type: str | None = None,
) -> ProviderError:
    """Classify an HTTP error status (or a mid-stream error event carried by a 200)."""
    retryable = (
        status in _RETRYABLE_STATUSES
        or status >= 500
        or (status < 400 and error_type in _RETRYABLE_ERROR_TYPES)
    )
    detail = f"{provider}: HTTP {status}" if status >= 400 else f"{provider}: stream error"
    if error_type:
        detail += f" {error_type}"
    return ProviderError(
        f"{detail}: {message}",
        retryable=retryable,
        retry_after=retry_after_seconds(headers) if retryable and headers is not None else None,
        status=status if status >= 400 else None,
        prefill_rejected=status == 400 and "prefill" in message.lower(),
        # A 400 at the request, or an error event inside a 200 stream: the Responses API
        # reports `context_length_exceeded` after `response.created` (openai-python raises it
        # as `APIError` from its stream).
        context_overflow=status <= 400 and context_overflow(message, error_type),
    )


_OVERFLOW_SIGNS = (
    "context_length_exceeded",  # OpenAI's error code (Chat Completions and Responses)
    "maximum context length",  # OpenAI Chat Completions: "This model's maximum context length…"
    "context window",  # OpenAI Responses: "Your input exceeds the context window of this model"
    "prompt is too long",  # Anthropic Messages: "prompt is too long: N tokens > M maximum"
)


def context_overflow(message: str, error_type: str | None) -> bool:
    """An error that says the request does not fit the model's context window."""
    text = f"{error_type or ''} {message}".lower()
    return any(sign in text for sign in _OVERFLOW_SIGNS)


def _from_status_error(
    provider: str, status: int, headers: Mapping[str, str], body: object, fallback: str
) -> ProviderError:
    message = _body_message(body) or fallback
    return from_status(
        provider, status, message, headers=headers, error_type=_body_error_type(body)
    )


def is_sdk_error(exc: BaseException, name: str) -> bool:
    """`exc` is the SDKs' error class `name` (`APIStatusError`, `APIConnectionError`, ...):
    openai-python's, or the Anthropic SDK's once this process has imported it (none of its
    errors can exist before, and importing it only to check would cost a third of a worker's
    start: the registry imports it for the first `anthropic:` model)."""
    if isinstance(exc, getattr(openai, name)):
        return True
    anthropic = sys.modules.get("anthropic")
    return anthropic is not None and isinstance(exc, getattr(anthropic, name))


def to_provider_error(provider: str, exc: BaseException) -> ProviderError | None:
    """The `ProviderError` for a known SDK or transport failure; None for anything else."""
    if isinstance(exc, ProviderError):
        return exc
    if is_sdk_error(exc, "APIStatusError"):
        # Both SDKs' status errors carry the same fields.
        status_error = cast(openai.APIStatusError, exc)
        return _from_status_error(
            provider,
            status_error.status_code,
            status_error.response.headers,
            status_error.body,
            status_error.message,
        )
    if is_sdk_error(exc, "APITimeoutError"):
        return ProviderError(f"{provider}: request timed out", retryable=True)
    if is_sdk_error(exc, "APIConnectionError"):
        return ProviderError(
            f"{provider}: connection error: {exc.__cause__ or exc}", retryable=True
        )
    if isinstance(exc, httpx2.TimeoutException | httpx.TimeoutException):
        return ProviderError(f"{provider}: request timed out", retryable=True)
    if isinstance(exc, httpx2.TransportError | httpx.TransportError):
        return ProviderError(f"{provider}: connection error: {exc}", retryable=True)
    if isinstance(exc, openai.APIError):
        # An error reported inside a 200 stream.
        return from_status(provider, 200, exc.message, error_type=exc.type or exc.code or "error")
    return None
