"""Compaction, pure: estimate a request's size, choose what a summary replaces, and apply the
newest summary on the active path."""

from dataclasses import dataclass

from perdure.domain.conversation import ConversationItem
from perdure.domain.ui import UIMessage

CHARS_PER_TOKEN = 4
"""A rough estimate for the threshold (providers count exactly; this only decides when)."""
SUMMARY_HEADING = "Summary of the earlier conversation (the messages it replaces are not shown):"


def estimate_tokens(system: str, conversation: list[ConversationItem]) -> int:
    chars = len(system) + sum(len(item.model_dump_json()) for item in conversation)
    return chars // CHARS_PER_TOKEN


@dataclass(frozen=True)
class Overlaid:
    summary: str | None
    """The newest summary on the path, if any."""
    recent: list[UIMessage]
    """The messages after what it covers (the whole path without one)."""


def cut_point(recent: list[UIMessage], keep: int) -> int | None:
    """The index of the last message a new summary covers: everything but about the last
    `keep` messages, so that what is kept starts with a user message. None when there is too
    little to summarize."""
    index = len(recent) - 1 - max(keep, 1)
    while index >= 0 and recent[index + 1].role != "user":
        index -= 1
    return index if index >= 0 else None


def with_summary(system: str, summary: str | None) -> str:
    if not summary:
        return system
    return f"{system}\n\n{SUMMARY_HEADING}\n{summary}"
