"""Committed TurnWorkflow histories still replay: a non-deterministic change fails here."""

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows import TurnWorkflow

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_a_recorded_turn_replays_deterministically(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())

    await Replayer(
        workflows=[TurnWorkflow], data_converter=pydantic_data_converter
    ).replay_workflow(history)


def test_there_are_histories_to_replay() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "tool_call",
        "recovered",
        "exhausted",
        "stopped",
        "parked",
    }
