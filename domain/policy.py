"""Per-agent policies that workflows and activities both read (plain data)."""

from datetime import timedelta

from pydantic import BaseModel, Field


class RecoveryPolicy(BaseModel):
    """How hard a turn tries to recover before it ends with `terminal_message`."""

    model_config = {"frozen": True}

    max_attempts: int = Field(default=10, ge=1)
    stall_timeout: timedelta = timedelta(seconds=60)
    no_progress_timeout: timedelta = timedelta(minutes=5)
    terminal_message: str = "The assistant was interrupted and could not recover. Please try again."
