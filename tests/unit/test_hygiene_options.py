"""The storage-hygiene options work as documented or are refused at start."""

from datetime import timedelta

import pytest
from pydantic import ValidationError

from perdure.agent import Agent
from perdure.agents_registry import AgentRegistry
from perdure.runtime.settings import Settings


def settings(**environment: str) -> Settings:
    return Settings.model_validate({"PERDURE_MODEL": "demo", **environment})


def test_closed_chunk_logs_are_kept_seven_days_by_default() -> None:
    assert settings().chunk_retention() == timedelta(hours=168)


def test_a_retention_of_zero_keeps_closed_chunk_logs_forever() -> None:
    assert settings(PERDURE_CHUNK_RETENTION_HOURS="0").chunk_retention() is None


def test_a_fractional_retention_is_taken_in_hours() -> None:
    retention = settings(PERDURE_CHUNK_RETENTION_HOURS="1.5").chunk_retention()

    assert retention == timedelta(minutes=90)


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "a week"])
def test_a_retention_that_is_not_a_finite_number_of_hours_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="PERDURE_CHUNK_RETENTION_HOURS"):
        settings(PERDURE_CHUNK_RETENTION_HOURS=value)


def agent_keeping(limit: object) -> Agent:
    attributes = {"name": "keeper", "max_persisted_messages": limit}
    return type("Keeper", (Agent,), attributes)()


@pytest.mark.parametrize("limit", [None, 1, 50])
def test_max_persisted_messages_may_be_unset_or_a_positive_whole_number(limit: object) -> None:
    AgentRegistry([agent_keeping(limit)])


@pytest.mark.parametrize("limit", [0, -3, 2.5, True, "10"])
def test_any_other_max_persisted_messages_stops_the_worker_with_a_clear_error(
    limit: object,
) -> None:
    with pytest.raises(ValueError, match="'keeper': max_persisted_messages must be None"):
        AgentRegistry([agent_keeping(limit)])
