"""Provider events become UI chunks with ids unique within the message."""

from perdure.domain.provider_events import (
    Finish,
    ReasoningDelta,
    ReasoningSigned,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from perdure.domain.step_chunks import StepChunker


def test_text_is_wrapped_in_start_and_end() -> None:
    chunker = StepChunker(0)
    chunks = chunker.feed(TextDelta(text="Hi")) + chunker.feed(Finish(reason="stop"))

    assert chunks == [
        {"type": "text-start", "id": "s0a1-t1"},
        {"type": "text-delta", "id": "s0a1-t1", "delta": "Hi"},
        {"type": "text-end", "id": "s0a1-t1"},
    ]
    assert chunker.finish == Finish(reason="stop")


def test_a_tool_call_closes_the_text_before_it() -> None:
    chunker = StepChunker(2)
    chunks = (
        chunker.feed(TextDelta(text="Let me add."))
        + chunker.feed(ToolCallStart(id="c", name="add"))
        + chunker.feed(ToolCallDelta(id="c", arguments_delta='{"a":1}'))
        + chunker.feed(ToolCallEnd(id="c", name="add", arguments={"a": 1}))
    )

    assert [c["type"] for c in chunks] == [
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
    ]
    assert chunks[0]["id"] == "s2a1-t1"
    assert [call.id for call in chunker.tool_calls] == ["c"]


def test_a_continued_step_appends_to_the_open_text_part() -> None:
    chunker = StepChunker(0, attempt=2, open_text_id="s0a1-t1")

    chunks = chunker.feed(TextDelta(text=" 4"))

    assert chunks == [{"type": "text-delta", "id": "s0a1-t1", "delta": " 4"}]


def test_empty_deltas_produce_nothing() -> None:
    assert StepChunker(0).feed(TextDelta(text="")) == []


def test_a_continuations_reasoning_before_its_text_is_not_logged() -> None:
    chunker = StepChunker(1, attempt=2, open_text_id="s1a1-t1")

    chunks = [
        *chunker.feed(ReasoningDelta(text="They want me to go on from 4.")),
        *chunker.feed(TextDelta(text=" 5 6")),
        *chunker.feed(Finish(reason="stop")),
    ]

    assert chunks == [
        {"type": "text-delta", "id": "s1a1-t1", "delta": " 5 6"},
        {"type": "text-end", "id": "s1a1-t1"},
    ]


def test_reasoning_after_a_continuations_text_is_logged() -> None:
    chunker = StepChunker(1, attempt=2, open_text_id="s1a1-t1")
    chunker.feed(TextDelta(text=" 5"))

    chunks = chunker.feed(ReasoningDelta(text="Now a tool."))

    assert [c["type"] for c in chunks] == ["text-end", "reasoning-start", "reasoning-delta"]


def test_a_signed_reasoning_part_ends_with_its_signature() -> None:
    chunker = StepChunker(1)

    chunks = chunker.feed(ReasoningDelta(text="Hmm.")) + chunker.feed(
        ReasoningSigned(signature="sig_1")
    )

    assert chunks[-1] == {
        "type": "reasoning-end",
        "id": "s1a1-r1",
        "providerMetadata": {"anthropic": {"signature": "sig_1"}},
    }


def test_an_omitted_thinking_is_kept_as_an_empty_signed_reasoning_part() -> None:
    chunker = StepChunker(1)

    chunks = chunker.feed(ReasoningSigned(signature="sig_1")) + chunker.feed(TextDelta(text="Hi"))

    assert [c["type"] for c in chunks] == [
        "reasoning-start",
        "reasoning-end",
        "text-start",
        "text-delta",
    ]
    assert chunks[1]["providerMetadata"] == {"anthropic": {"signature": "sig_1"}}


def test_a_redacted_thinking_block_is_kept_with_its_data() -> None:
    chunks = StepChunker(1).feed(ReasoningSigned(redacted_data="opaque"))

    assert chunks[-1]["providerMetadata"] == {"anthropic": {"redactedData": "opaque"}}


def test_an_openai_reasoning_item_is_kept_by_its_id() -> None:
    chunks = StepChunker(1).feed(ReasoningSigned(item_id="rs_1"))

    assert chunks[-1]["providerMetadata"] == {"openai": {"itemId": "rs_1"}}
