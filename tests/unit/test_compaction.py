"""Compaction, pure: what a summary replaces, and which summary applies on a path."""

from perdure.domain.compaction import SUMMARY_HEADING, cut_point, with_summary
from perdure.domain.ui import UIMessage


def path(*roles: str) -> list[UIMessage]:
    return [
        UIMessage.model_validate({"id": f"m{i}", "role": role, "parts": []})
        for i, role in enumerate(roles)
    ]


def test_a_summary_covers_all_but_the_newest_messages_and_the_rest_starts_with_a_user() -> None:
    messages = path("user", "assistant", "user", "assistant", "user", "assistant", "user")

    cut = cut_point(messages, keep=2)

    assert cut == 3
    assert messages[cut + 1].role == "user"


def test_too_short_a_path_is_not_summarized() -> None:
    assert cut_point(path("user", "assistant", "user"), keep=2) is None


def test_the_summary_goes_into_the_system_prompt_under_a_heading() -> None:
    assert (
        with_summary("Be brief.", "they want tea")
        == f"Be brief.\n\n{SUMMARY_HEADING}\nthey want tea"
    )
    assert with_summary("Be brief.", None) == "Be brief."
