"""Interrupted tool calls are settled as errors before the next model call, never re-run."""

from typing import Any

import pytest

from perdure.domain.reducer import reduce_chunks
from perdure.domain.repair import (
    INTERRUPTED_TOOL_TEXT,
    default_repair,
    repair_chunks,
    settled_parts_only,
    unsettled_tool_parts,
)

STARTED = {"type": "tool-input-start", "toolCallId": "a", "toolName": "refund"}
AVAILABLE = {
    "type": "tool-input-available",
    "toolCallId": "b",
    "toolName": "refund",
    "input": {"id": 1},
}
SETTLED = [
    {"type": "tool-input-available", "toolCallId": "c", "toolName": "lookup", "input": {}},
    {"type": "tool-output-available", "toolCallId": "c", "output": "ok"},
]
AWAITING_APPROVAL = [
    {"type": "tool-input-available", "toolCallId": "d", "toolName": "delete", "input": {}},
    {"type": "tool-approval-request", "toolCallId": "d", "approvalId": "ap"},
]


def test_only_tool_calls_without_a_result_need_repair() -> None:
    reduction = reduce_chunks([STARTED, AVAILABLE, *SETTLED])

    assert [p["toolCallId"] for p in unsettled_tool_parts(reduction)] == ["a", "b"]


def test_a_call_still_awaiting_approval_when_the_model_is_called_again_needs_repair() -> None:
    # A model step comes only after every wait of the park was answered or ran out, and an
    # approved call ran: a call still `approval-requested` then was interrupted.
    reduction = reduce_chunks([*SETTLED, *AWAITING_APPROVAL])

    assert [p["toolCallId"] for p in unsettled_tool_parts(reduction)] == ["d"]


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            [STARTED],
            [
                {
                    "type": "tool-input-available",
                    "toolCallId": "a",
                    "toolName": "refund",
                    "input": {},
                },
                {
                    "type": "tool-output-error",
                    "toolCallId": "a",
                    "errorText": INTERRUPTED_TOOL_TEXT,
                },
            ],
        ),
        (
            [AVAILABLE],
            [{"type": "tool-output-error", "toolCallId": "b", "errorText": INTERRUPTED_TOOL_TEXT}],
        ),
    ],
)
def test_the_default_repair_records_an_error_result(
    log: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    (part,) = unsettled_tool_parts(reduce_chunks(log))

    chunks = repair_chunks(part, default_repair(part))

    assert chunks == expected
    repaired = reduce_chunks(log + chunks).tool_part(part["toolCallId"])
    assert repaired is not None and repaired["state"] == "output-error"


def test_a_repair_to_a_result_is_logged_as_the_calls_output() -> None:
    (part,) = unsettled_tool_parts(reduce_chunks([AVAILABLE]))

    chunks = repair_chunks(part, {**part, "state": "output-available", "output": "assumed done"})

    assert chunks == [
        {"type": "tool-output-available", "toolCallId": "b", "output": "assumed done"}
    ]


def test_settled_tool_results_survive_a_partial_that_is_not_persisted() -> None:
    reduction = reduce_chunks(
        [
            {"type": "start-step"},
            *SETTLED,
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "x"},
        ]
    )

    kept = settled_parts_only(reduction.parts)

    assert [p["type"] for p in kept] == ["step-start", "tool-lookup"]
