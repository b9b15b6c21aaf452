"""A turn's payloads name it by one `turn` value, and still read the flat ids that histories
and workflows started before it carry."""

import json
from typing import Any

import pytest
from pydantic import ValidationError

from perdure.domain.payloads import (
    FinishTurnInput,
    ModelStepInput,
    OfTurn,
    ParkTurnInput,
    RelaySubTurnInput,
    ResumeTurnInput,
    RunToolInput,
    SubTurnInput,
    SubTurnStart,
    TurnInput,
    TurnRef,
)

IDS = {
    "submission_id": "sub-1",
    "session_id": "ses-1",
    "assistant_message_id": "msg-1",
    "agent": "default",
}
TURN = TurnRef(**IDS)

OWN_FIELDS: list[tuple[type[OfTurn], dict[str, Any]]] = [
    (TurnInput, {"admitted": True, "admit_at": 12.5}),
    (ModelStepInput, {"step": 3}),
    (RunToolInput, {"tool_call_id": "call-1"}),
    (ParkTurnInput, {"tool_call_ids": ["call-1", "call-2"]}),
    (ResumeTurnInput, {"wait_ids": ["wait-1"]}),
    (SubTurnInput, {"tool_call_id": "call-1", "tool_name": "researcher"}),
    (
        FinishTurnInput,
        {"outcome": "error", "error_text": "boom", "exhausted": True, "persist_partial": False},
    ),
]


@pytest.mark.parametrize(("model", "own"), OWN_FIELDS, ids=lambda p: getattr(p, "__name__", ""))
def test_the_flat_shape_recorded_before_turn_validates_into_the_turn(
    model: type[OfTurn], own: dict[str, Any]
) -> None:
    old = {**IDS, **own}

    new = model.model_validate(old)

    assert new == model.model_validate({"turn": IDS, **own})
    assert new.turn == TURN
    for name, value in own.items():
        assert getattr(new, name) == value


@pytest.mark.parametrize(("model", "own"), OWN_FIELDS, ids=lambda p: getattr(p, "__name__", ""))
def test_the_flat_shape_validates_from_json_as_a_history_holds_it(
    model: type[OfTurn], own: dict[str, Any]
) -> None:
    recorded = json.dumps({**IDS, **own})

    assert model.model_validate_json(recorded) == model.model_validate({"turn": IDS, **own})


@pytest.mark.parametrize(("model", "own"), OWN_FIELDS, ids=lambda p: getattr(p, "__name__", ""))
def test_the_new_shape_round_trips_with_the_ids_in_turn(
    model: type[OfTurn], own: dict[str, Any]
) -> None:
    new = model.model_validate({"turn": IDS, **own})

    dumped = new.model_dump(mode="json")

    assert dumped["turn"] == IDS
    assert not set(IDS) & set(dumped)
    assert model.model_validate_json(new.model_dump_json()) == new


def test_a_relay_recorded_before_turn_reads_its_flat_call() -> None:
    old = {
        "call": {**IDS, "tool_call_id": "call-1", "tool_name": "researcher"},
        "child_submission_id": "sub-2",
        "child_message_id": "msg-2",
    }

    relay = RelaySubTurnInput.model_validate(old)

    assert relay.call.turn == TURN
    assert relay.call.tool_call_id == "call-1"
    assert relay.child_submission_id == "sub-2"


def test_a_sub_turn_start_recorded_before_turn_reads_its_flat_child() -> None:
    started = SubTurnStart.model_validate({"child": {**IDS, "admitted": True}})

    assert started.child is not None
    assert started.child.turn == TURN
    assert started.child.admitted


def test_a_turn_is_frozen() -> None:
    with pytest.raises(ValidationError):
        TURN.agent = "other"  # type: ignore[misc]


def test_a_payload_without_its_turn_is_refused() -> None:
    with pytest.raises(ValidationError):
        RunToolInput.model_validate({"tool_call_id": "call-1"})
