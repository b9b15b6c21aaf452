"""`PromptSchedule`: a prompt an agent sends itself on a schedule (docs/schedules.md).

The module keeps its name, `perdure.schedules`: agent code imports `PromptSchedule` from it."""

from datetime import timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from perdure.domain.prompt_schedules import (
    MAX_PROMPT_CHARS,
    SCHEDULE_ID_PATTERN,
    TARGET_SESSION_PATTERN,
    TENANT_PATTERN,
    Recurrence,
)


def time_zone_problem(name: str) -> str | None:
    """Why `name` is not an IANA time zone this machine knows, or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r} (an IANA name such as 'Europe/Paris')"
    return None


class PromptSchedule(BaseModel):
    """Declared in an agent's `schedules`; the workers create (or update) its Temporal
    Schedule when they start. Each occurrence sends `prompt` as a user message into
    `session_id` (created by the first occurrence, owned by `tenant_id`), queued like any chat
    message, with idempotency key `schedule:{id}:{occurrence time}`.

    Give exactly one of `cron` (5 fields, in `timezone`, UTC by default) and `every` (a whole
    number of seconds, at least 60). `paused` is the state a new schedule starts in; once it
    exists, pause and resume it through the API (a worker's start keeps that state).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=SCHEDULE_ID_PATTERN)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    session_id: str = Field(pattern=TARGET_SESSION_PATTERN)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str | None = None
    tenant_id: str = Field(default="default", pattern=TENANT_PATTERN)
    paused: bool = False

    @field_validator("prompt")
    @classmethod
    def _no_nul(cls, prompt: str) -> str:
        if "\x00" in prompt or not prompt.strip():
            raise ValueError("the prompt must have text and no NUL character")
        return prompt

    @field_validator("every")
    @classmethod
    def _whole_seconds(cls, every: timedelta | None) -> timedelta | None:
        if every is not None and every.total_seconds() != int(every.total_seconds()):
            raise ValueError("`every` must be a whole number of seconds")
        return every

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, timezone: str | None) -> str | None:
        problem = None if timezone is None else time_zone_problem(timezone)
        if problem is not None:
            raise ValueError(problem)
        return timezone

    @model_validator(mode="after")
    def _recurs(self) -> "PromptSchedule":
        try:
            self.recurrence()
        except ValidationError as error:
            raise ValueError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
        return self

    def recurrence(self) -> Recurrence:
        return Recurrence(
            cron=self.cron,
            every_seconds=None if self.every is None else int(self.every.total_seconds()),
            timezone=self.timezone,
        )
