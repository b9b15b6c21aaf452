"""Prompt schedules: when a schedule fires, and what one occurrence carries (pure, no I/O).

Shared by the agent declarations (`perdure.PromptSchedule`), the REST API, the store and the
workflow, so a schedule is validated the same way wherever it comes from.
"""

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
"""No `:`: it separates the parts of the Temporal schedule id and of the idempotency key."""
TENANT_PATTERN = r"^[A-Za-z0-9_.\-]{1,200}$"
"""The tenants PERDURE_API_KEYS may name (runtime/settings.py)."""
TARGET_SESSION_PATTERN = r"^[A-Za-z0-9_\-.:]{1,200}$"
"""The chat ids the gateway accepts (gateway/schemas.py SESSION_ID_PATTERN)."""
MAX_PROMPT_CHARS = 20_000
MIN_EVERY_SECONDS = 60
"""A minute, as cron: every occurrence is a model turn, and a chat needs no finer grain."""
MAX_EVERY_SECONDS = 366 * 24 * 3600
MAX_CRON_CHARS = 200

_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"})
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {name: index + 1 for index, name in enumerate(_MONTHS)}),
    ("day of week", 0, 7, {name: index for index, name in enumerate(_DAYS)}),  # 7: Sunday too
)
_ITEM = re.compile(r"^(\*|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(\d+))?$")


def _value(text: str, low: int, high: int, names: dict[str, int]) -> int | None:
    if text.isdigit():
        number = int(text)
        return number if low <= number <= high else None
    return names.get(text.upper())


def _field_problem(text: str, name: str, low: int, high: int, names: dict[str, int]) -> str | None:
    for item in text.split(","):
        match = _ITEM.match(item)
        if match is None:
            return f"{name}: {item!r} is not a value, a range, `*` or a step"
        span, step = match.group(1), match.group(2)
        if step is not None and int(step) == 0:
            return f"{name}: a step must be at least 1"
        if span == "*":
            continue
        bounds = [_value(part, low, high, names) for part in span.split("-")]
        if any(bound is None for bound in bounds):
            return f"{name}: {span!r} is not within {low}-{high}"
        if len(bounds) == 2 and bounds[0] is not None and bounds[1] is not None:
            if bounds[0] > bounds[1]:
                return f"{name}: the range {span!r} runs backwards"
    return None


def cron_problem(expression: str) -> str | None:
    """Why `expression` is not a cron expression Perdure accepts, or None.

    Five fields (minute hour day-of-month month day-of-week) with values, `a-b` ranges, `*`,
    `/n` steps, lists and JAN-DEC / SUN-SAT names; or @hourly, @daily, @weekly, @monthly,
    @yearly. Temporal's own parser accepts more (seconds, years, `L`, `#`): refused here so a
    declaration means the same thing everywhere it is read.
    """
    text = expression.strip()
    if text.lower() in _DESCRIPTORS:
        return None
    fields = text.split()
    if len(fields) != 5:
        return (
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week); "
            f"{expression!r} has {len(fields)}"
        )
    for field, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        problem = _field_problem(field, name, low, high, names)
        if problem is not None:
            return problem
    return None


class Recurrence(BaseModel):
    """When a schedule fires: a cron expression (in `timezone`, UTC by default) or a fixed
    interval (counted from the Unix epoch, as Temporal does, so `every` 1 hour fires on the
    hour)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cron: str | None = Field(default=None, max_length=MAX_CRON_CHARS)
    every_seconds: int | None = Field(default=None, ge=MIN_EVERY_SECONDS, le=MAX_EVERY_SECONDS)
    timezone: str | None = Field(default=None, max_length=64)
    """An IANA time zone name (checked where the time zone database is at hand)."""

    @field_validator("cron")
    @classmethod
    def _normalized(cls, cron: str | None) -> str | None:
        """One space between fields, descriptors in lower case: what Temporal is given."""
        if cron is None:
            return None
        text = " ".join(cron.split())
        return text.lower() if text.startswith("@") else text

    @model_validator(mode="after")
    def _one_way(self) -> "Recurrence":
        if (self.cron is None) == (self.every_seconds is None):
            raise ValueError("give exactly one of `cron` and an interval (`every`)")
        if self.cron is not None:
            problem = cron_problem(self.cron)
            if problem is not None:
                raise ValueError(f"invalid cron expression: {problem}")
        elif self.timezone is not None:
            raise ValueError("`timezone` applies to `cron` only; an interval ignores it")
        return self


ScheduleSource = Literal["declared", "api"]


class FireScheduleInput(BaseModel):
    """What the Temporal Schedule's action carries: ids only; the prompt is read from the
    store when the occurrence fires."""

    tenant_id: str
    schedule_id: str
    occurrence: datetime | None = None
    """Set only by a manual start; a run started by the schedule takes its scheduled time
    (the `TemporalScheduledStartTime` search attribute)."""


class FireScheduleResult(BaseModel):
    outcome: Literal["submitted", "gone", "refused"]
    """`gone`: the schedule was deleted after this occurrence was started; `refused`: the
    session's concurrency strategy refused it (`reject` while a turn ran)."""
    submission_id: str | None = None
    created: bool = False
    """False when this occurrence had already been submitted (it fired twice)."""


def occurrence_text(occurrence: datetime) -> str:
    """The occurrence in UTC, ISO 8601 with `Z` (microseconds only when it has some)."""
    return occurrence.astimezone(UTC).isoformat().replace("+00:00", "Z")


def occurrence_key(schedule_id: str, occurrence: datetime) -> str:
    """The idempotency key of one occurrence: a schedule firing twice submits once."""
    return f"schedule:{schedule_id}:{occurrence_text(occurrence)}"


def occurrence_message_id(schedule_id: str, occurrence: datetime) -> str:
    """The user message's id: the same for every firing of one occurrence."""
    stamp = occurrence_text(occurrence).replace("-", "").replace(":", "")
    return f"schedule-{schedule_id}-{stamp}"
