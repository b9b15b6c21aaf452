"""How `bench.compare` judges what a client ended with after a SIGKILL, and reads its stream."""

from typing import Any

from bench.compare import Turn, classify
from perdure.testing.chat_client import counting


def test_classify_names_what_the_client_ended_with() -> None:
    assert classify(counting(5), 5, finished=True) == "exact"
    assert classify("1 2 31 2 3 4 5", 5, finished=True) == "duplicated (+5 chars)"
    assert classify("1 2 3", 5, finished=True) == "lost (2 of 5 tokens missing)"
    assert classify("1 2", 5, finished=False) == "lost (3 of 5 tokens missing), never finished"
    assert classify("", 5, finished=False) == "lost (5 of 5 tokens missing), never finished"


def test_a_reset_aware_client_keeps_only_the_text_after_the_last_retry() -> None:
    turn = Turn("chat", "@count 3", 3)
    chunks: list[dict[str, Any]] = [
        {"type": "start"},
        {"type": "text-delta", "delta": "1"},
        {"type": "text-delta", "delta": " 2"},
        {"type": "data-retry", "data": {"attempt": 2}},
        {"type": "text-delta", "delta": "1"},
        {"type": "text-delta", "delta": " 2"},
        {"type": "text-delta", "delta": " 3"},
    ]
    turn.stream.events = list(enumerate(chunks))
    turn.stream.received_at = [0.0] * len(chunks)
    turn.stream.done = True
    assert turn.stream.text() == "1 21 2 3"
    assert turn.reset_aware_text() == "1 2 3"
    assert turn.retries() == 1
    assert not turn.exact()
