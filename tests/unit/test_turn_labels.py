"""What a turn is labelled with in Temporal: the first words of its message, and its link."""

import pytest

from perdure.domain.turn_labels import CONTINUE_SUMMARY, SUMMARY_CHARS, first_words, message_summary
from perdure.runtime.settings import Settings


def test_a_short_message_is_its_own_summary_on_one_line() -> None:
    assert first_words("  what is\n\t12*7  ") == "what is 12*7"


def test_a_long_message_is_cut_at_a_word_within_the_limit() -> None:
    text = "please summarize the quarterly report and list every open risk by owner " * 3

    summary = first_words(text)

    assert summary == "please summarize the quarterly report and list every open…"
    assert len(summary) <= SUMMARY_CHARS


def test_one_long_word_is_cut_inside_it() -> None:
    assert first_words("x" * 500) == "x" * (SUMMARY_CHARS - 1) + "…"


@pytest.mark.parametrize(
    ("message", "summary"),
    [
        ({"role": "user", "parts": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}, "hi there"),
        ({"role": "user", "parts": [{"type": "file", "filename": "q3.pdf", "url": "data:…"}]}, "[q3.pdf]"),
        ({"role": "user", "parts": [{"type": "file", "url": "data:…"}]}, "[a file]"),
        ({"role": "assistant", "parts": [{"type": "text", "text": "the last answer"}]}, CONTINUE_SUMMARY),
    ],
)  # fmt: skip
def test_a_message_without_text_is_summarized_by_what_it_has(
    message: dict[str, object], summary: str
) -> None:
    assert message_summary(message) == summary


def test_the_link_of_a_turn_is_its_workflow_page_in_the_configured_ui() -> None:
    default = Settings.model_validate({"PERDURE_TEMPORAL_UI_PORT": 9000})
    deployed = Settings.model_validate(
        {
            "PERDURE_TEMPORAL_UI_URL": "https://temporal.example.com/",
            "TEMPORAL_NAMESPACE": "chat prod",
        }
    )

    assert (
        default.turn_ui_url("abc") == "http://127.0.0.1:9000/namespaces/default/workflows/turn-abc"
    )
    assert deployed.turn_ui_url("abc") == (
        "https://temporal.example.com/namespaces/chat%20prod/workflows/turn-abc"
    )
