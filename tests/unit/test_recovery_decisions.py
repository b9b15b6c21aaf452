"""Recovery decisions, table-driven: retry vs continue, and the incident budget."""

from datetime import timedelta

import pytest

from domain.continuation import step_state
from domain.policy import RecoveryPolicy
from domain.recovery import Incident, evaluate_incident, progress_of, recovery_kind
from domain.reducer import reduce_chunks

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


def test_recovery_notices_are_not_progress() -> None:
    assert progress_of([START, STEP, NOTICE, *TEXT, NOTICE]) == 4


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
