"""How a turn's activities failed, and how the turn ends because of it: deterministic helpers
of the turn workflow."""

from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

from perdure.domain.names import RECOVERY_EXHAUSTED, RECOVERY_SKIPPED, TURN_STOPPED
from perdure.domain.payloads import Outcome


def root_cause(failure: ActivityError) -> BaseException | None:
    cause = failure.cause
    while isinstance(cause, ActivityError) and cause.cause is not None:
        cause = cause.cause
    return cause


def describe(failure: ActivityError) -> str:
    cause = root_cause(failure)
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or failure)


def was_cancelled(failure: ActivityError) -> bool:
    """Cancelled through Temporal, or refused to start because a stop is in the store."""
    cause = failure.cause
    return isinstance(cause, CancelledError) or (
        isinstance(cause, ApplicationError) and cause.type == TURN_STOPPED
    )


_BACKSTOPS = (RetryState.MAXIMUM_ATTEMPTS_REACHED, RetryState.TIMEOUT)


class Ending:
    """How the turn ends; filled in by whatever stops the agent loop."""

    def __init__(self) -> None:
        self.outcome: Outcome = "completed"
        self.finish_reason: str | None = None
        self.error_text: str | None = None
        self.exhausted = False
        self.persist_partial = True

    def failed(self, failure: ActivityError) -> None:
        if was_cancelled(failure):
            self.outcome = "aborted"
            return
        self.outcome, self.error_text = "error", describe(failure)[:4000]
        cause = root_cause(failure)
        if isinstance(cause, ApplicationError) and cause.type == RECOVERY_EXHAUSTED:
            self.exhausted = True
        elif failure.retry_state in _BACKSTOPS:
            # Temporal's own bound on a model step was reached before the agent's budget.
            self.exhausted = True
            self.error_text = f"recovery backstop reached: {self.error_text}"[:4000]
        elif isinstance(cause, ApplicationError) and cause.type == RECOVERY_SKIPPED:
            details = cause.details[0] if cause.details else {}
            self.persist_partial = bool(details.get("persist", True))
