"""What a stored assistant message may hold: no provider-ephemeral metadata, and at most
ROW_MAX_BYTES, reached by compacting the largest contents with a visible marker."""

import copy
import json
from typing import Any

import pytest

from perdure.domain.storage_hygiene import (
    KEEP_BYTES,
    ROW_MAX_BYTES,
    for_storage,
    sanitize_parts,
    stored_bytes,
    truncated_text,
)

LIMIT = 20_000


def tool(call_id: str, output: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool-lookup",
        "toolCallId": call_id,
        "state": "output-available",
        "input": {},
        "output": output,
        **extra,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value, "state": "done"}


def test_openai_item_ids_and_encrypted_reasoning_are_stripped_and_other_metadata_kept() -> None:
    part = {
        "type": "reasoning",
        "text": "thinking",
        "providerMetadata": {
            "openai": {"itemId": "rs_1", "reasoningEncryptedContent": "gAAA", "keep": 1},
            "other": {"x": 2},
        },
    }

    (clean,) = sanitize_parts([part])

    assert clean["providerMetadata"] == {"openai": {"keep": 1}, "other": {"x": 2}}


def test_metadata_left_empty_by_stripping_is_removed_from_the_part() -> None:
    part = {"type": "text", "text": "hi", "providerMetadata": {"openai": {"itemId": "msg_1"}}}

    assert sanitize_parts([part]) == [{"type": "text", "text": "hi"}]


def test_a_tool_parts_call_provider_metadata_is_stripped_too() -> None:
    part = tool("c1", 1, callProviderMetadata={"openai": {"itemId": "fc_1"}})

    (clean,) = sanitize_parts([part])

    assert "callProviderMetadata" not in clean


def test_anthropic_thinking_signatures_are_kept_for_replay() -> None:
    signed = {
        "type": "reasoning",
        "text": "thinking",
        "providerMetadata": {"anthropic": {"signature": "sig"}},
    }
    redacted = {
        "type": "reasoning",
        "text": "",
        "providerMetadata": {"anthropic": {"redactedData": "opaque"}},
    }

    assert sanitize_parts([signed, redacted]) == [signed, redacted]


def test_a_reasoning_part_with_neither_text_nor_metadata_is_dropped() -> None:
    empty = {"type": "reasoning", "text": "  ", "providerMetadata": {"openai": {"itemId": "rs"}}}

    assert sanitize_parts([empty, text("answer")]) == [text("answer")]


def test_sanitizing_never_changes_the_parts_it_is_given() -> None:
    parts = [{"type": "text", "text": "x", "providerMetadata": {"openai": {"itemId": "m"}}}]
    before = copy.deepcopy(parts)

    sanitize_parts(parts)

    assert parts == before


def test_a_message_within_the_limit_is_stored_as_it_is() -> None:
    parts = [text("a" * 5_000), tool("c1", "b" * 5_000)]

    stored = for_storage(parts, {"submissionId": "s"}, limit=LIMIT)

    assert stored.parts == parts
    assert stored.metadata == {"submissionId": "s"}
    assert not stored.compacted


def test_only_the_largest_tool_outputs_needed_to_fit_are_compacted() -> None:
    parts = [tool("small", "s" * 4_000), tool("large", "l" * 12_000), tool("mid", "m" * 8_000)]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.metadata["compactedToolOutputs"] == ["large"]
    assert stored.parts[0]["output"] == "s" * 4_000
    assert stored.parts[2]["output"] == "m" * 8_000
    assert stored.stored_bytes <= LIMIT


def test_a_compacted_tool_output_keeps_its_start_and_says_how_much_was_kept() -> None:
    structured = {"rows": ["r" * 100] * 200}
    parts = [tool("c1", structured)]

    stored = for_storage(parts, {}, limit=5_000)

    output = stored.parts[0]["output"]
    whole = json.dumps(structured, ensure_ascii=False)
    assert output.startswith(whole[:KEEP_BYTES])
    assert output.endswith(
        f"[output truncated for storage: {KEEP_BYTES} of {len(whole.encode())} bytes kept]"
    )
    assert stored.parts[0]["state"] == "output-available"


def test_an_output_whose_cut_would_not_be_smaller_is_left_whole() -> None:
    # 300 CJK characters: 900 bytes of UTF-8 (under KEEP_BYTES), 1,800 bytes as stored
    parts = [tool("cjk", "字" * 300), tool("big", "x" * 30_000)]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.parts[0]["output"] == "字" * 300
    assert stored.metadata["compactedToolOutputs"] == ["big"]


def test_long_text_is_truncated_only_when_tool_outputs_are_not_enough() -> None:
    parts = [text("t" * 30_000), tool("c1", "o" * 30_000)]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.metadata["compactedToolOutputs"] == ["c1"]
    assert stored.metadata["compactedTextParts"] == [0]
    assert stored.parts[0]["text"] == (
        f"[Text truncated for storage (30000 chars). First 500 chars: {'t' * 500}...]"
    )


def test_reasoning_is_truncated_before_the_answer_text() -> None:
    reasoning = {"type": "reasoning", "text": "r" * 15_000, "state": "done"}
    parts = [reasoning, text("a" * 15_000)]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.metadata["compactedReasoningParts"] == [0]
    assert "compactedTextParts" not in stored.metadata
    assert stored.parts[1]["text"] == "a" * 15_000


def test_texts_are_truncated_oldest_first_so_the_final_answer_survives() -> None:
    parts = [text("1" * 14_000), text("2" * 14_000), text("final " * 1_000)]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.metadata["compactedTextParts"] == [0, 1]
    assert stored.parts[2]["text"] == "final " * 1_000


def test_a_part_that_is_neither_output_nor_text_is_replaced_by_a_visible_notice() -> None:
    image = {
        "type": "file",
        "mediaType": "image/png",
        "url": "data:image/png;base64," + "A" * 50_000,
    }
    parts = [text("look"), image]

    stored = for_storage(parts, {}, limit=LIMIT)

    assert stored.metadata["removedParts"] == [1]
    notice = stored.parts[1]
    assert notice["type"] == "text"
    assert notice["text"].startswith("[A file part of ")
    assert notice["text"].endswith(" bytes was removed for storage.]")


def test_a_message_of_thousands_of_parts_drops_its_oldest_behind_one_marker() -> None:
    parts = [text(f"{i:04d}" + "x" * 200) for i in range(400)]

    stored = for_storage(parts, {}, limit=LIMIT)

    dropped = stored.metadata["removedLeadingParts"]
    assert stored.parts[0]["text"].startswith(f"[The first {dropped} parts (")
    assert stored.parts[1:] == parts[dropped:]
    assert stored.stored_bytes <= LIMIT


def test_indices_recorded_before_oldest_parts_are_dropped_point_at_the_kept_parts() -> None:
    parts = [text("y" * 300) for _ in range(60)] + [text("x" * 1_500) for _ in range(3)]

    stored = for_storage(parts, {}, limit=4_000)

    compacted = stored.metadata["compactedTextParts"]
    assert len(compacted) == 3
    for index in compacted:
        assert stored.parts[index]["text"].startswith("[Text truncated for storage (1500 chars)")
    assert stored.parts[0]["text"].startswith(
        f"[The first {stored.metadata['removedLeadingParts']} parts"
    )


def test_the_facts_record_the_size_before_compaction() -> None:
    parts = [tool("c1", "o" * 30_000)]

    stored = for_storage(parts, {"submissionId": "s"}, limit=LIMIT)

    assert stored.metadata["compactedFromBytes"] == stored_bytes(parts, {"submissionId": "s"})
    assert stored.metadata["submissionId"] == "s"
    assert stored.compacted


@pytest.mark.parametrize(
    "parts",
    [
        [tool(f"c{i}", "o" * 3_000) for i in range(20)],
        [text("é" * 8_000), tool("c", {"k": "v" * 9_000})],
        [
            {
                "type": "tool-write",
                "toolCallId": "w",
                "state": "input-available",
                "input": {"c": "z" * 40_000},
            }
        ],
        [{"type": "data-report", "data": ["d" * 100] * 500}, text("ok")],
        [text("😀" * 3_000) for _ in range(5)],
        [{"type": "step-start"}] * 3_000,
    ],
    ids=["many-outputs", "non-ascii", "tool-input", "data-part", "emoji", "tiny-parts"],
)
def test_every_compacted_message_fits_the_limit(parts: list[dict[str, Any]]) -> None:
    stored = for_storage(parts, {"submissionId": "s"}, limit=LIMIT)

    assert stored.stored_bytes <= LIMIT
    assert stored.stored_bytes == stored_bytes(stored.parts, stored.metadata)


def test_the_default_limit_is_about_one_point_eight_megabytes() -> None:
    parts = [tool("a", "a" * 1_000_000), tool("b", "b" * 900_000)]

    stored = for_storage(parts, {})

    assert ROW_MAX_BYTES == 1_800_000
    assert stored.metadata["compactedToolOutputs"] == ["a"]
    assert stored.stored_bytes <= ROW_MAX_BYTES


def test_the_text_marker_names_the_length_and_keeps_the_first_500_characters() -> None:
    assert truncated_text("abc" * 400) == (
        f"[Text truncated for storage (1200 chars). First 500 chars: {('abc' * 400)[:500]}...]"
    )
