"""Recovery decisions, pure and clock-injected: retry or continue, and the incident budget."""

from typing import Literal

from pydantic import BaseModel

from perdure.domain.policy import RecoveryPolicy
from perdure.domain.reducer import Reduction
from perdure.domain.ui import Chunk

RecoveryKind = Literal["retry", "continue"]
IncidentStatus = Literal["attempting", "completed", "skipped", "exhausted"]
ExhaustionReason = Literal[
    "max_age_exceeded",
    "total_attempts_exceeded",
    "recovery_time_exceeded",
    "no_progress_timeout",
    "recovery_aborted",
    "max_attempts_exceeded",
]

RECOVERY_NOTICE = "data-recovery"
"""Transient chunk type telling clients a recovery happened (not stored in the message)."""


def recovery_kind(reduction: Reduction) -> RecoveryKind:
    """`retry` when nothing of the answer was streamed: the user message is answered afresh
    (it is never re-appended). Otherwise `continue` the same assistant message."""
    streamed = [part for part in reduction.parts if part["type"] != "step-start"]
    return "continue" if streamed else "retry"


NOT_PROGRESS = frozenset(
    {
        RECOVERY_NOTICE,
        "start",
        "start-step",
        "finish-step",
        "text-end",
        "reasoning-end",
        "tool-output-error",
        "finish",
        "abort",
        "error",
    }
)
"""Chunks a recovery attempt writes itself (the log's opening, step boundaries, the closing of
open text, a repaired call's errored result) or that end a turn: none is the model's work, so
none resets the in-a-row budget (an attempt that only repairs and dies again still counts)."""


def progress_of(log: list[Chunk]) -> int:
    """Chunks the model (or a tool) produced."""
    return sum(1 for chunk in log if chunk.get("type") not in NOT_PROGRESS)


class Incident(BaseModel):
    incident_id: str
    kind: RecoveryKind
    attempt: int
    """Attempt within the budget: 1 on the first recovery, back to 1 after progress."""
    progress: int
    first_seen_at: float
    last_attempt_at: float
    last_progress_at: float
    status: IncidentStatus = "attempting"
    reason: str | None = None
    total_attempts: int = 1
    """Recovery attempts over the whole turn, across incidents; never reset."""
    turn_first_seen_at: float | None = None
    """The turn's first recovery, across incidents; never reset."""


class IncidentDecision(BaseModel):
    incident: Incident
    detected: bool
    """First sighting of this incident (emit `chat.recovery.detected`)."""
    exhausted: ExhaustionReason | None = None


def evaluate_incident(
    existing: Incident | None,
    *,
    incident_id: str,
    kind: RecoveryKind,
    progress: int,
    now: float,
    policy: RecoveryPolicy,
    turn_started_at: float | None = None,
) -> IncidentDecision:
    """Count a recovery attempt: attempts without progress count, progress resets them; the
    turn's total attempts and recovery time are never reset (precedence as the seeds list:
    the turn's age, the total budgets, then no progress, then attempts in a row)."""
    fresh = existing is None or existing.status in ("completed", "skipped")
    if fresh:
        incident = Incident(
            incident_id=incident_id,
            kind=kind,
            attempt=1,
            progress=progress,
            first_seen_at=now,
            last_attempt_at=now,
            last_progress_at=now,
            total_attempts=existing.total_attempts + 1 if existing else 1,
            turn_first_seen_at=_turn_start(existing, now),
        )
    else:
        assert existing is not None
        advanced = progress > existing.progress
        incident = existing.model_copy(
            update={
                "kind": kind,
                "attempt": 1 if advanced else existing.attempt + 1,
                "progress": progress,
                "last_attempt_at": now,
                "last_progress_at": now if advanced else existing.last_progress_at,
                "status": "attempting",
                "total_attempts": existing.total_attempts + 1,
                "turn_first_seen_at": _turn_start(existing, now),
            }
        )
    exhausted: ExhaustionReason | None = None
    turn_started = incident.turn_first_seen_at if incident.turn_first_seen_at is not None else now
    max_age = policy.max_age.total_seconds() if policy.max_age is not None else None
    if max_age is not None and turn_started_at is not None and now - turn_started_at > max_age:
        exhausted = "max_age_exceeded"
    elif incident.total_attempts > policy.max_total_attempts:
        exhausted = "total_attempts_exceeded"
    elif now - turn_started > policy.max_recovery_time.total_seconds():
        exhausted = "recovery_time_exceeded"
    elif now - incident.last_progress_at > policy.no_progress_timeout.total_seconds():
        exhausted = "no_progress_timeout"
    elif incident.attempt > policy.max_attempts:
        exhausted = "max_attempts_exceeded"
    if exhausted is not None:
        incident = incident.model_copy(update={"status": "exhausted", "reason": exhausted})
    return IncidentDecision(incident=incident, detected=fresh, exhausted=exhausted)


def aborted_by_predicate(decision: IncidentDecision) -> IncidentDecision:
    """`should_keep_recovering` said no: exhausted as `recovery_aborted`, unless a reason that
    comes first in the seeds' precedence already ended it."""
    if decision.exhausted not in (None, "max_attempts_exceeded"):
        return decision
    incident = decision.incident.model_copy(
        update={"status": "exhausted", "reason": "recovery_aborted"}
    )
    return decision.model_copy(update={"incident": incident, "exhausted": "recovery_aborted"})


def _turn_start(existing: Incident | None, now: float) -> float:
    if existing is None:
        return now
    if existing.turn_first_seen_at is not None:
        return existing.turn_first_seen_at
    return existing.first_seen_at


def recovery_notice(incident: Incident, *, max_attempts: int, action: str) -> Chunk:
    return {
        "type": RECOVERY_NOTICE,
        "data": {
            "incidentId": incident.incident_id,
            "attempt": incident.attempt,
            "maxAttempts": max_attempts,
            "kind": incident.kind,
            "action": action,
        },
        "transient": True,
    }
