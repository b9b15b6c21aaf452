"""Declaring a scheduled prompt: what `PromptSchedule` accepts, what it refuses and why, and
the key every occurrence is submitted under."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from perdure import PromptSchedule
from perdure.domain.prompt_schedules import Recurrence, occurrence_key, occurrence_message_id


def _declared(**timing: object) -> PromptSchedule:
    return PromptSchedule.model_validate(
        {"id": "digest", "prompt": "Summarise", "session_id": "s", **timing}
    )


@pytest.mark.parametrize(
    ("timing", "recurrence"),
    [
        ({"cron": "0 9 * * mon-fri"}, Recurrence(cron="0 9 * * mon-fri")),
        ({"cron": "  */15   1-5 1,15 JAN-MAR 0-7 "}, Recurrence(cron="*/15 1-5 1,15 JAN-MAR 0-7")),
        ({"cron": "@Daily"}, Recurrence(cron="@daily")),
        (
            {"cron": "0 0 1 1 *", "timezone": "Europe/Paris"},
            Recurrence(cron="0 0 1 1 *", timezone="Europe/Paris"),
        ),
        ({"every": timedelta(hours=1)}, Recurrence(every_seconds=3600)),
    ],
    ids=["weekdays", "ranges-steps-lists-names", "descriptor", "time-zone", "interval"],
)
def test_a_valid_declaration_gives_its_recurrence(
    timing: dict[str, object], recurrence: Recurrence
) -> None:
    assert _declared(**timing).recurrence() == recurrence


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"cron": "0 9 * * *", "every": timedelta(hours=1)}, "exactly one of"),
        ({}, "exactly one of"),
        ({"cron": "0 24 * * *"}, "hour: '24' is not within 0-23"),
        ({"cron": "0 9 * FOO *"}, "month: 'FOO' is not within 1-12"),
        ({"cron": "0 9 5-1 * *"}, "runs backwards"),
        ({"cron": "*/0 9 * * *"}, "a step must be at least 1"),
        ({"cron": "0 9 L * *"}, "day of month"),
        ({"cron": "0 0 9 * * *"}, "5 fields"),
        ({"every": timedelta(seconds=30)}, "greater than or equal to 60"),
        ({"every": timedelta(seconds=90.5)}, "whole number of seconds"),
        ({"cron": "@daily", "timezone": "Nowhere/Land"}, "unknown time zone"),
        ({"every": timedelta(hours=1), "timezone": "UTC"}, "applies to `cron` only"),
        ({"cron": "@daily", "id": "a:b"}, "id"),
        ({"cron": "@daily", "prompt": " \n"}, "the prompt must have text"),
        ({"cron": "@daily", "tenant_id": "a b"}, "tenant_id"),
    ],
    ids=[
        "cron-and-every",
        "neither",
        "hour-out-of-range",
        "unknown-month-name",
        "backwards-range",
        "zero-step",
        "last-day-syntax",
        "six-fields",
        "under-a-minute",
        "fraction-of-a-second",
        "unknown-time-zone",
        "time-zone-with-every",
        "colon-in-id",
        "blank-prompt",
        "space-in-tenant",
    ],
)
def test_an_invalid_declaration_is_refused_naming_the_problem(
    fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        _declared(**fields)

    assert problem in str(refused.value)


def test_an_occurrence_is_keyed_by_schedule_and_utc_time() -> None:
    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    paris = at.astimezone(ZoneInfo("Europe/Paris"))

    assert occurrence_key("digest", at) == "schedule:digest:2026-01-05T09:00:00Z"
    assert occurrence_key("digest", paris) == occurrence_key("digest", at)
    assert occurrence_message_id("digest", at) == "schedule-digest-20260105T090000Z"
