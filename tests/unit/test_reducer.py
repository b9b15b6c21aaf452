"""The chunk reducer folds a log into the UIMessage the AI SDK client would build."""

from perdure.domain.reducer import Reducer, reduce_chunks


def test_text_deltas_accumulate_into_one_text_part() -> None:
    reduction = reduce_chunks(
        [
            {"type": "start", "messageId": "m1", "messageMetadata": {"submissionId": "s"}},
            {"type": "start-step"},
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "Hello "},
            {"type": "text-delta", "id": "t", "delta": "world"},
            {"type": "text-end", "id": "t"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ]
    )

    assert reduction.message_id == "m1"
    assert reduction.metadata == {"submissionId": "s"}
    assert reduction.parts == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello world", "state": "done"},
    ]
    assert reduction.terminal == "finish"
    assert reduction.finish_reason == "stop"


def test_a_tool_call_moves_through_its_states() -> None:
    log = [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "add"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"a":1'},
    ]
    assert reduce_chunks(log).tool_part("c1") == {
        "type": "tool-add",
        "toolCallId": "c1",
        "state": "input-streaming",
        "input": None,
    }
    log.append(
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "add", "input": {"a": 1}}
    )
    log.append({"type": "tool-output-available", "toolCallId": "c1", "output": 2})

    part = reduce_chunks(log).tool_part("c1")

    assert part is not None
    assert (part["state"], part["input"], part["output"]) == ("output-available", {"a": 1}, 2)


def test_a_tool_error_is_kept_with_its_text() -> None:
    part = reduce_chunks(
        [
            {"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}},
            {"type": "tool-output-error", "toolCallId": "c", "errorText": "boom"},
        ]
    ).tool_part("c")

    assert part is not None
    assert (part["state"], part["errorText"]) == ("output-error", "boom")


def test_transient_data_parts_are_not_stored_and_ided_ones_replace() -> None:
    reduction = reduce_chunks(
        [
            {"type": "data-recovery", "data": {"attempt": 1}, "transient": True},
            {"type": "data-progress", "id": "p", "data": 1},
            {"type": "data-progress", "id": "p", "data": 2},
        ]
    )

    assert reduction.parts == [{"type": "data-progress", "data": 2, "id": "p"}]


def test_an_interrupted_log_leaves_its_text_part_open() -> None:
    reduction = reduce_chunks(
        [
            {"type": "start-step"},
            {"type": "text-start", "id": "s0-t1"},
            {"type": "text-delta", "id": "s0-t1", "delta": "1 2"},
        ]
    )

    assert reduction.open_text_id == "s0-t1"
    assert reduction.terminal is None


def test_a_continued_delta_extends_the_open_part() -> None:
    reduction = reduce_chunks(
        [
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "1 2"},
            {"type": "text-delta", "id": "t", "delta": " 3"},
            {"type": "abort", "reason": "user-cancelled"},
        ]
    )

    assert reduction.text() == "1 2 3"
    assert reduction.terminal == "abort"
    assert reduction.open_text_id is None


LOG = [
    {"type": "start", "messageId": "m"},
    {"type": "start-step"},
    {"type": "text-start", "id": "t"},
    {"type": "text-delta", "id": "t", "delta": "Hel"},
    {"type": "text-delta", "id": "t", "delta": "lo"},
    {"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": {}},
    {"type": "finish-step"},
]


def test_an_incremental_reduction_equals_the_whole_logs_at_every_point() -> None:
    reducer = Reducer()
    for end in range(len(LOG)):
        reducer.add(LOG[end : end + 1])
        assert reducer.snapshot() == reduce_chunks(LOG[: end + 1])


def test_a_snapshot_is_not_changed_by_chunks_added_after_it() -> None:
    reducer = Reducer(LOG[:4])
    before = reducer.snapshot()
    reducer.add(LOG[4:])

    assert before == reduce_chunks(LOG[:4])
    assert before.open_text_id == "t"
