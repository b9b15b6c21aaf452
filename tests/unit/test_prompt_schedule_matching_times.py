"""Backfill asks Temporal for a schedule's occurrences; a busy server may cancel or time out
that read, so it is asked again a bounded number of times, and other errors pass through."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesResponse
from temporalio.service import RPCError, RPCStatusCode

from perdure.turn_control import prompt_schedules
from perdure.turn_control.prompt_schedules import MATCHING_TIMES_RETRY_PAUSES, matching_times

START = datetime(2026, 11, 20, tzinfo=UTC)
END = START + timedelta(days=2)


class ScriptedService:
    """Answers `list_schedule_matching_times` with the next of `outcomes` (an error or times)."""

    def __init__(self, *outcomes: RPCError | list[datetime]) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def list_schedule_matching_times(self, request: Any) -> ListScheduleMatchingTimesResponse:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, RPCError):
            raise outcome
        response = ListScheduleMatchingTimesResponse()
        for moment in outcome:
            response.start_time.add().FromDatetime(moment)
        return response


def client_of(service: ScriptedService) -> Any:
    return SimpleNamespace(namespace="default", workflow_service=service)


def cancelled() -> RPCError:
    return RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt_schedules, "MATCHING_TIMES_RETRY_PAUSES", (0.0,) * 3)


async def ask(service: ScriptedService) -> list[datetime]:
    return await matching_times(
        client_of(service), task_queue="q", tenant_id="t", schedule_id="s", start=START, end=END
    )


async def test_a_read_the_server_cancelled_is_asked_again() -> None:
    service = ScriptedService(cancelled(), [START + timedelta(days=1)])

    assert await ask(service) == [START + timedelta(days=1)]
    assert service.calls == 2


async def test_it_gives_up_after_a_bounded_number_of_attempts() -> None:
    service = ScriptedService(*[cancelled()] * (len(MATCHING_TIMES_RETRY_PAUSES) + 1))

    with pytest.raises(RPCError):
        await ask(service)
    assert service.calls == len(MATCHING_TIMES_RETRY_PAUSES) + 1


async def test_an_error_that_is_not_transient_is_not_retried() -> None:
    service = ScriptedService(RPCError("schedule not found", RPCStatusCode.NOT_FOUND, b""))

    with pytest.raises(RPCError):
        await ask(service)
    assert service.calls == 1
