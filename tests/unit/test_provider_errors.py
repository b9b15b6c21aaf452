"""How provider failures are classified for Temporal's retry policy."""

import pytest

from activities.providers.errors import from_status, retry_after_seconds


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 529])
def test_transient_statuses_are_retryable(status: int) -> None:
    assert from_status("p", status, "boom").retryable


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_client_errors_are_final(status: int) -> None:
    assert not from_status("p", status, "boom").retryable


def test_a_400_about_prefill_is_flagged() -> None:
    error = from_status("p", 400, "Prefilling assistant messages is not supported")
    assert error.prefill_rejected and not error.retryable


def test_a_stream_error_event_is_retryable_when_overloaded() -> None:
    assert from_status("p", 200, "Overloaded", error_type="overloaded_error").retryable
    assert not from_status("p", 200, "bad", error_type="invalid_request_error").retryable


def test_retry_after_prefers_milliseconds_then_seconds_then_dates() -> None:
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_a_context_overflow_told_inside_a_stream_is_an_overflow() -> None:
    told = from_status(
        "openai-responses:m",
        200,
        "Your input exceeds the context window of this model. Please adjust your input and "
        "try again.",
        error_type="invalid_request_error",
    )

    assert told.context_overflow and not told.retryable


def test_a_server_error_is_never_taken_for_an_overflow() -> None:
    assert not from_status("p", 500, "context window warming up").context_overflow
