"""Adjacent plain deltas of one part are written as one chunk: the same text, fewer rows."""

from perdure.domain.delta_coalescing import coalesce_deltas


def text(part: str, delta: str) -> dict[str, object]:
    return {"type": "text-delta", "id": part, "delta": delta}


def test_adjacent_text_deltas_of_one_part_join_into_one() -> None:
    joined = coalesce_deltas([text("t", "1"), text("t", " 2"), text("t", " 3")])

    assert joined == [text("t", "1 2 3")]


def test_deltas_of_different_parts_stay_apart_and_in_order() -> None:
    chunks = [text("a", "1"), text("b", "2"), text("a", "3")]

    assert coalesce_deltas(chunks) == chunks


def test_other_chunks_between_deltas_keep_their_place() -> None:
    end = {"type": "text-end", "id": "t"}
    start = {"type": "text-start", "id": "u"}

    joined = coalesce_deltas([text("t", "a"), text("t", "b"), end, start, text("u", "c")])

    assert joined == [text("t", "ab"), end, start, text("u", "c")]


def test_reasoning_and_tool_input_deltas_join_per_part() -> None:
    chunks = [
        {"type": "reasoning-delta", "id": "r", "delta": "think"},
        {"type": "reasoning-delta", "id": "r", "delta": "ing"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"a":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": " 1}"},
    ]

    assert coalesce_deltas(chunks) == [
        {"type": "reasoning-delta", "id": "r", "delta": "thinking"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"a": 1}'},
    ]


def test_a_delta_with_provider_metadata_keeps_its_own_chunk() -> None:
    marked = {**text("t", "b"), "providerMetadata": {"x": {"y": 1}}}

    assert coalesce_deltas([text("t", "a"), marked, text("t", "c")]) == [
        text("t", "a"),
        marked,
        text("t", "c"),
    ]


def test_the_chunks_given_are_not_changed() -> None:
    first = text("t", "a")

    coalesce_deltas([first, text("t", "b")])

    assert first == text("t", "a")
