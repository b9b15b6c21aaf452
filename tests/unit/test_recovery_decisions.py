"""Recovery decisions, table-driven: retry vs continue, and the incident budget."""

from datetime import timedelta

import pytest

from perdure.domain.policy import RecoveryPolicy
from perdure.domain.recovery import (
    Incident,
    aborted_by_predicate,
    evaluate_incident,
    progress_of,
    recovery_kind,
)
from perdure.domain.reducer import reduce_chunks
from perdure.domain.step_state import step_state

POLICY = RecoveryPolicy(max_attempts=3, no_progress_timeout=timedelta(seconds=60))

START = {"type": "start", "messageId": "m"}
STEP = {"type": "start-step"}
TEXT = [{"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "1 2"}]
NOTICE = {"type": "data-recovery", "data": {}, "transient": True}


@pytest.mark.parametrize(
    ("log", "kind"),
    [
        ([], "retry"),
        ([START], "retry"),
        ([START, STEP], "retry"),
        ([START, STEP, NOTICE], "retry"),
        ([START, STEP, *TEXT], "continue"),
        (
            [START, STEP, {"type": "tool-input-start", "toolCallId": "c", "toolName": "x"}],
            "continue",
        ),
    ],
)
def test_a_turn_is_retried_only_when_nothing_was_streamed(
    log: list[dict[str, object]], kind: str
) -> None:
    assert recovery_kind(reduce_chunks(log)) == kind


def test_recovery_notices_and_step_boundaries_are_not_progress() -> None:
    assert progress_of([START, STEP, NOTICE, *TEXT, NOTICE]) == 2


def test_what_a_recovery_attempt_writes_itself_is_not_progress() -> None:
    """An attempt that only closes the open text, repairs a call and opens a step, then dies
    again, made no progress: the in-a-row budget is not reset by it."""
    interrupted = [START, STEP, *TEXT, {"type": "tool-input-available", "toolCallId": "c"}]
    repaired = [
        *interrupted,
        NOTICE,
        {"type": "text-end", "id": "t"},
        {"type": "tool-output-error", "toolCallId": "c", "errorText": "interrupted"},
        {"type": "finish-step"},
        {"type": "start-step"},
    ]

    assert progress_of(repaired) == progress_of(interrupted)


def test_a_turn_older_than_max_age_is_exhausted_before_any_other_budget() -> None:
    policy = RecoveryPolicy(max_attempts=1, max_age=timedelta(seconds=30))

    decision = evaluate_incident(
        incident(1, 5),
        incident_id="i",
        kind="continue",
        progress=5,
        now=100.0,
        policy=policy,
        turn_started_at=60.0,
    )

    assert decision.exhausted == "max_age_exceeded"


def test_a_declining_predicate_exhausts_as_recovery_aborted_unless_a_budget_came_first() -> None:
    within = evaluate_incident(
        incident(1, 5), incident_id="i", kind="continue", progress=5, now=10.0, policy=POLICY
    )
    stale = evaluate_incident(
        incident(1, 5), incident_id="i", kind="continue", progress=5, now=100.0, policy=POLICY
    )

    assert aborted_by_predicate(within).exhausted == "recovery_aborted"
    assert aborted_by_predicate(within).incident.status == "exhausted"
    assert aborted_by_predicate(stale).exhausted == "no_progress_timeout"


def incident(
    attempt: int, progress: int, *, last_progress_at: float = 0.0, status: str = "attempting"
) -> Incident:
    return Incident(
        incident_id="i",
        kind="continue",
        attempt=attempt,
        progress=progress,
        first_seen_at=0.0,
        last_attempt_at=last_progress_at,
        last_progress_at=last_progress_at,
        status=status,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("existing", "progress", "now", "attempt", "detected", "exhausted"),
    [
        # first sighting
        (None, 5, 10.0, 1, True, None),
        # no progress since the last attempt: the attempt counts
        (incident(1, 5), 5, 10.0, 2, False, None),
        (incident(3, 5), 5, 10.0, 4, False, "max_attempts_exceeded"),
        # progress resets the count
        (incident(3, 5), 9, 10.0, 1, False, None),
        # no progress for longer than no_progress_timeout, whatever the count
        (incident(1, 5, last_progress_at=0.0), 5, 61.0, 2, False, "no_progress_timeout"),
        # progress just now keeps a long incident alive
        (incident(2, 5, last_progress_at=0.0), 6, 500.0, 1, False, None),
        # a completed incident is over: a new failure is a new incident
        (incident(3, 5, status="completed"), 5, 10.0, 1, True, None),
    ],
)
def test_the_incident_budget(
    existing: Incident | None,
    progress: int,
    now: float,
    attempt: int,
    detected: bool,
    exhausted: str | None,
) -> None:
    decision = evaluate_incident(
        existing, incident_id="i", kind="continue", progress=progress, now=now, policy=POLICY
    )

    assert decision.incident.attempt == attempt
    assert decision.detected is detected
    assert decision.exhausted == exhausted
    assert (decision.incident.status == "exhausted") is (exhausted is not None)


def test_an_interrupted_step_with_a_tool_call_is_not_continued_in_place() -> None:
    log = [START, STEP, *TEXT, {"type": "tool-input-start", "toolCallId": "c", "toolName": "x"}]

    state = step_state(reduce_chunks(log), 0)

    assert state.started and not state.finished
    assert state.has_tool_calls


def test_a_step_an_earlier_attempt_finished_is_recognised() -> None:
    log = [START, STEP, *TEXT, {"type": "text-end", "id": "t"}, {"type": "finish-step"}]

    state = step_state(reduce_chunks(log), 0)

    assert state.finished
    assert state.prefill == "1 2"
    assert state.open_text_id is None


def test_the_next_step_starts_fresh_after_a_finished_one() -> None:
    log = [START, STEP, *TEXT, {"type": "text-end", "id": "t"}, {"type": "finish-step"}]

    state = step_state(reduce_chunks(log), 1)

    assert not state.started
    assert [p["type"] for p in state.prior_parts] == ["step-start", "text"]


def _one_token_per_attempt(policy: RecoveryPolicy, attempts: int) -> list[str | None]:
    """A provider that dies after one more token on every attempt: progress every time."""
    existing: Incident | None = None
    outcomes: list[str | None] = []
    for n in range(attempts):
        decision = evaluate_incident(
            existing, incident_id="i", kind="continue", progress=n + 1, now=float(n), policy=policy
        )
        outcomes.append(decision.exhausted)
        existing = decision.incident
    return outcomes


def test_progress_does_not_reset_the_turns_total_recovery_attempts() -> None:
    policy = RecoveryPolicy(max_attempts=3, max_total_attempts=5)
    outcomes = _one_token_per_attempt(policy, 6)
    assert outcomes == [None] * 5 + ["total_attempts_exceeded"]


def test_a_completed_incident_keeps_the_turns_total_for_the_next_one() -> None:
    policy = RecoveryPolicy(max_total_attempts=2)
    first = evaluate_incident(
        None, incident_id="i", kind="continue", progress=1, now=0.0, policy=policy
    ).incident
    done = first.model_copy(update={"status": "completed"})
    second = evaluate_incident(
        done, incident_id="i", kind="continue", progress=5, now=1.0, policy=policy
    )
    assert (second.incident.attempt, second.incident.total_attempts) == (1, 2)
    third = evaluate_incident(
        second.incident.model_copy(update={"status": "completed"}),
        incident_id="i",
        kind="continue",
        progress=9,
        now=2.0,
        policy=policy,
    )
    assert third.exhausted == "total_attempts_exceeded"


def test_the_turns_recovery_time_is_bounded_even_with_progress() -> None:
    policy = RecoveryPolicy(max_recovery_time=timedelta(seconds=10))
    first = evaluate_incident(
        None, incident_id="i", kind="continue", progress=1, now=0.0, policy=policy
    ).incident
    later = evaluate_incident(
        first, incident_id="i", kind="continue", progress=2, now=11.0, policy=policy
    )
    assert later.exhausted == "recovery_time_exceeded"


def test_no_policy_can_outlast_temporals_retry_backstop() -> None:
    from workflows._policies import MODEL_RETRY

    with pytest.raises(ValueError):
        RecoveryPolicy(max_total_attempts=MODEL_RETRY.maximum_attempts)
