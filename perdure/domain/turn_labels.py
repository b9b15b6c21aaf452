"""How a turn is found and described in the Temporal UI: search attributes and summaries.

The attribute names are part of every deployment's Temporal namespace (registered by
`perdure temporal-setup`, or by `perdure dev` on its dev server): renaming one strands the
turns recorded under the old name.
"""

import re
from typing import Any, Final, Literal

from pydantic import BaseModel
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

SESSION_ID: Final = SearchAttributeKey.for_keyword("PerdureSessionId")
"""The chat id the client uses (`sessions.chat_id`), not the session's storage key."""
TENANT: Final = SearchAttributeKey.for_keyword("PerdureTenant")
AGENT: Final = SearchAttributeKey.for_keyword("PerdureAgent")
STATUS: Final = SearchAttributeKey.for_keyword("PerdureStatus")
"""Upserted by the turn as it goes: one of `TurnStatus`."""
TURN_ATTRIBUTES: Final = (SESSION_ID, TENANT, AGENT, STATUS)

TurnStatus = Literal["pending", "running", "waiting", "completed", "aborted", "skipped", "error"]
"""A submission's status, and `waiting`: parked on approvals or client tool outputs."""

SUMMARY_CHARS: Final = 60
CONTINUE_SUMMARY: Final = "continue the last answer"


class TurnLabels(BaseModel):
    """What a turn's workflow is started with besides its input: small, never the whole text."""

    chat_id: str
    tenant_id: str
    agent: str
    summary: str
    """The first words of the message the turn answers (at most `SUMMARY_CHARS`)."""


def search_attributes(labels: TurnLabels, status: TurnStatus) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(SESSION_ID, labels.chat_id),
            SearchAttributePair(TENANT, labels.tenant_id),
            SearchAttributePair(AGENT, labels.agent),
            SearchAttributePair(STATUS, status),
        ]
    )


def first_words(text: str, limit: int = SUMMARY_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (with `…`)."""
    line = re.sub(r"\s+", " ", text).strip()
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    at_space = cut.rfind(" ")
    return f"{cut[:at_space] if at_space > limit // 2 else cut}…"


def message_summary(message: dict[str, Any]) -> str:
    """The summary of a turn answering `message` (a stored UIMessage as JSON)."""
    if message.get("role") == "assistant":
        return CONTINUE_SUMMARY
    parts = [part for part in message.get("parts") or [] if isinstance(part, dict)]
    text = " ".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    if text.strip():
        return first_words(text)
    files = [str(p.get("filename") or "a file") for p in parts if p.get("type") == "file"]
    return first_words(f"[{', '.join(files)}]") if files else "(no text)"
