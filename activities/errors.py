"""Turn provider failures into Temporal failures that say what happened."""

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from activities.providers.base import ProviderError


def provider_failure(error: ProviderError, *, label: str) -> ApplicationError:
    status = f" (HTTP {error.status})" if error.status else ""
    kind = "retryable" if error.retryable else "not retryable"
    delay = timedelta(seconds=error.retry_after) if error.retry_after else None
    return ApplicationError(
        f"{label}{status}, {kind}: {error}",
        type="ProviderError",
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )
