"""How the turn workflow reads the failure that ended its agent loop (table-driven)."""

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

from perdure.domain.names import MODEL_STEP_ACTIVITY, RECOVERY_EXHAUSTED, TURN_STOPPED
from workflows._endings import Ending


def activity_failure(cause: BaseException, retry_state: RetryState | None) -> ActivityError:
    failure = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type=MODEL_STEP_ACTIVITY,
        activity_id="1",
        retry_state=retry_state,
    )
    failure.__cause__ = cause
    return failure


PROVIDER_DOWN = ApplicationError("provider answered 503", type="ProviderError")


@pytest.mark.parametrize(
    ("cause", "retry_state", "outcome", "exhausted"),
    [
        # Temporal's own bound on a model step (the backstop above every agent's budget)
        (PROVIDER_DOWN, RetryState.MAXIMUM_ATTEMPTS_REACHED, "error", True),
        (PROVIDER_DOWN, RetryState.TIMEOUT, "error", True),
        # the agent's budget, decided by the model step itself
        (
            ApplicationError("spent", type=RECOVERY_EXHAUSTED, non_retryable=True),
            RetryState.NON_RETRYABLE_FAILURE,
            "error",
            True,
        ),
        # a plain non-retryable error is an error, not an exhaustion
        (
            ApplicationError("bad request", type="BadModel", non_retryable=True),
            RetryState.NON_RETRYABLE_FAILURE,
            "error",
            False,
        ),
        # stopped: through Temporal, or refused at a step boundary because of the store
        (CancelledError("cancelled"), RetryState.CANCEL_REQUESTED, "aborted", False),
        (
            ApplicationError("stopped", type=TURN_STOPPED, non_retryable=True),
            RetryState.NON_RETRYABLE_FAILURE,
            "aborted",
            False,
        ),
    ],
)
def test_the_failure_that_ends_the_loop_decides_the_ending(
    cause: BaseException, retry_state: RetryState, outcome: str, exhausted: bool
) -> None:
    ending = Ending()

    ending.failed(activity_failure(cause, retry_state))

    assert (ending.outcome, ending.exhausted) == (outcome, exhausted)


def test_the_backstop_says_so_in_the_turns_error() -> None:
    ending = Ending()

    ending.failed(activity_failure(PROVIDER_DOWN, RetryState.MAXIMUM_ATTEMPTS_REACHED))

    assert ending.error_text == "recovery backstop reached: provider answered 503"
