"""Prompt schedules: a schedule's definition, its change, its backfill, and how it is shown."""

from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from gateway.errors import InvalidField
from gateway.schemas.common import AGENT_PATTERN, SESSION_ID_PATTERN
from perdure.domain.names import prompt_schedule_id
from perdure.domain.prompt_schedules import (
    MAX_CRON_CHARS,
    MAX_EVERY_SECONDS,
    MAX_PROMPT_CHARS,
    MIN_EVERY_SECONDS,
    SCHEDULE_ID_PATTERN,
    Recurrence,
)
from storage.prompt_schedules import PromptScheduleDefinition, recurrence_of
from storage.schedule_tables import PromptScheduleRow


class _Wire(BaseModel):
    """camelCase on the wire, as the chat API's fields (`sessionId`, `everySeconds`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# `Schedule…` class names are the OpenAPI schemas' names, part of the public API: they stay.
class ScheduleCreate(_Wire):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)

    id: str | None = Field(
        default=None, pattern=SCHEDULE_ID_PATTERN, description="Made up when not given."
    )
    agent: str | None = Field(
        default=None, pattern=AGENT_PATTERN, description="PERDURE_DEFAULT_AGENT when not given."
    )
    session_id: str = Field(
        pattern=SESSION_ID_PATTERN,
        description="The tenant's chat id the prompts go to; the first occurrence creates it.",
    )
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS, pattern=r"^[^\x00]*\S[^\x00]*$")
    cron: str | None = Field(
        default=None,
        max_length=MAX_CRON_CHARS,
        description="5 fields (minute hour day-of-month month day-of-week), or @hourly, @daily, "
        "@weekly, @monthly, @yearly. Give this or `everySeconds`.",
    )
    every_seconds: int | None = Field(
        default=None,
        ge=MIN_EVERY_SECONDS,
        le=MAX_EVERY_SECONDS,
        description="A fixed interval, counted from the Unix epoch (3600 fires on the hour).",
    )
    timezone: str | None = Field(
        default=None, max_length=64, description="The IANA time zone of `cron` (UTC if not given)."
    )
    paused: bool = False

    @model_validator(mode="after")
    def _recurs(self) -> "ScheduleCreate":
        self.recurrence()
        _check_timezone(self.timezone)
        return self

    def recurrence(self) -> Recurrence:
        return _recurrence(self.cron, self.every_seconds, self.timezone)


class ScheduleChange(_Wire):
    """Only the fields given change. `cron` or `everySeconds` replaces the recurrence (with
    `timezone` if given, else UTC); `timezone` alone moves a cron schedule to that zone (null:
    back to UTC)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)

    agent: str | None = Field(default=None, pattern=AGENT_PATTERN)
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)
    prompt: str | None = Field(
        default=None, min_length=1, max_length=MAX_PROMPT_CHARS, pattern=r"^[^\x00]*\S[^\x00]*$"
    )
    cron: str | None = Field(default=None, max_length=MAX_CRON_CHARS)
    every_seconds: int | None = Field(default=None, ge=MIN_EVERY_SECONDS, le=MAX_EVERY_SECONDS)
    timezone: str | None = Field(default=None, max_length=64)
    paused: bool | None = Field(default=None, description="Refused: pause or resume instead.")

    @model_validator(mode="after")
    def _meaningful(self) -> "ScheduleChange":
        given = self.model_fields_set
        if not given:
            raise ValueError(
                "give at least one of agent, sessionId, prompt, cron, everySeconds, timezone"
            )
        if "paused" in given:
            raise InvalidField(
                "paused", "`paused` is not changed here: POST /v1/schedules/{id}/pause or …/resume"
            )
        for name in ("agent", "session_id", "prompt"):
            if name in given and getattr(self, name) is None:
                raise InvalidField(to_camel(name), f"`{to_camel(name)}` may not be null")
        if "cron" in given or "every_seconds" in given:
            _recurrence(self.cron, self.every_seconds, self.timezone)
        _check_timezone(self.timezone)
        return self

    def applied_to(self, current: PromptScheduleDefinition) -> PromptScheduleDefinition:
        """`current` with this change; `InvalidField` when the result does not recur (a time
        zone for an interval schedule)."""
        given = self.model_fields_set
        recurrence = current.recurrence
        if "cron" in given or "every_seconds" in given:
            recurrence = _recurrence(self.cron, self.every_seconds, self.timezone)
        elif "timezone" in given:
            recurrence = _recurrence(recurrence.cron, recurrence.every_seconds, self.timezone)
        return PromptScheduleDefinition(
            agent=self.agent or current.agent,
            session_id=self.session_id or current.session_id,
            prompt=self.prompt or current.prompt,
            recurrence=recurrence,
        )


def _recurrence(cron: str | None, every_seconds: int | None, timezone: str | None) -> Recurrence:
    """The recurrence, or `InvalidField` naming the field at fault."""
    if cron is not None and every_seconds is not None:
        raise InvalidField(
            "everySeconds", "give exactly one of `cron` and an interval (`everySeconds`), not both"
        )
    if cron is None and every_seconds is None:
        raise InvalidField("cron", "give exactly one of `cron` and an interval (`everySeconds`)")
    if every_seconds is not None and timezone is not None:
        raise InvalidField("timezone", "`timezone` applies to `cron` only; an interval ignores it")
    try:
        return Recurrence(cron=cron, every_seconds=every_seconds, timezone=timezone)
    except ValidationError as error:  # what is left to fail is the cron expression
        raise InvalidField("cron", error.errors()[0]["msg"].removeprefix("Value error, ")) from None


def _check_timezone(timezone: str | None) -> None:
    if timezone is None:
        return
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidField(
            "timezone", f"unknown time zone {timezone!r} (an IANA name such as 'Europe/Paris')"
        ) from None


class BackfillRequest(_Wire):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)

    start: AwareDatetime = Field(description="Occurrences after this time…")
    end: AwareDatetime = Field(description="…up to this one, which may not be in the future.")


class SchedulePublic(_Wire):
    id: str
    agent: str
    session_id: str
    prompt: str
    cron: str | None
    every_seconds: int | None
    timezone: str | None
    paused: bool
    source: Literal["declared", "api"]
    created_at: datetime
    updated_at: datetime
    last_occurrence: str | None = Field(description="The last occurrence that fired (UTC ISO).")
    last_submission_id: str | None
    last_error: str | None = Field(description="Why the last occurrence could not be submitted.")
    temporal_schedule_id: str = Field(description="Its Temporal Schedule, in the Temporal UI.")

    @classmethod
    def of(cls, row: PromptScheduleRow, task_queue: str) -> "SchedulePublic":
        return cls.model_validate(schedule_fields(row, task_queue))


class RecentRun(_Wire):
    scheduled_at: datetime
    started_at: datetime
    workflow_id: str | None


class ScheduleDetail(SchedulePublic):
    next_run_times: list[datetime] = Field(description="The next occurrences (none when paused).")
    recent_runs: list[RecentRun] = Field(description="Occurrences Temporal started lately.")


class SchedulesPublic(BaseModel):
    data: list[SchedulePublic]
    count: int


class BackfillResult(_Wire):
    occurrences: list[datetime] = Field(description="The occurrences started, oldest first.")


def schedule_fields(row: PromptScheduleRow, task_queue: str) -> dict[str, Any]:
    recurrence = recurrence_of(row)
    return {
        "id": row.id,
        "agent": row.agent,
        "session_id": row.session_id,
        "prompt": row.prompt,
        "cron": recurrence.cron,
        "every_seconds": recurrence.every_seconds,
        "timezone": recurrence.timezone,
        "paused": row.paused,
        "source": row.source,
        "created_at": datetime.fromtimestamp(row.created_at, UTC),
        "updated_at": datetime.fromtimestamp(row.updated_at, UTC),
        "last_occurrence": row.last_occurrence,
        "last_submission_id": row.last_submission_id,
        "last_error": row.last_error,
        "temporal_schedule_id": prompt_schedule_id(task_queue, row.tenant_id, row.id),
    }
