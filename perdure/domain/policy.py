"""Per-agent policies that workflows and activities both read (plain data)."""

from datetime import timedelta

from pydantic import BaseModel, Field

MAX_RECOVERY_ATTEMPTS = 90
"""No policy may allow more: Temporal's own retry limit for a model step (the backstop in
workflows/_policies.py) sits above it, so the agent's budget always decides first."""


class RecoveryPolicy(BaseModel):
    """How hard a turn tries to recover before it ends with `terminal_message`."""

    model_config = {"frozen": True}

    max_attempts: int = Field(default=10, ge=1, le=MAX_RECOVERY_ATTEMPTS)
    """Recovery attempts in a row without progress; progress resets the count."""
    max_total_attempts: int = Field(default=30, ge=1, le=MAX_RECOVERY_ATTEMPTS)
    """Recovery attempts over the whole turn; progress does NOT reset it (Think's
    `maxRecoveryWork`): a provider that dies after one token every time still ends."""
    max_recovery_time: timedelta = timedelta(minutes=30)
    """From the turn's first recovery to its last attempt; progress does not reset it."""
    max_age: timedelta | None = None
    """A turn older than this (from its start) is not recovered: it ends with
    `terminal_message`, reason `max_age_exceeded` (a stale answer is worse than none).
    None: no limit beyond the other budgets."""
    stall_timeout: timedelta = timedelta(seconds=60)
    no_progress_timeout: timedelta = timedelta(minutes=5)
    terminal_message: str = "The assistant was interrupted and could not recover. Please try again."
