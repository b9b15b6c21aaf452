"""Submissions recorded straight in the store's intake (no gateway, no Temporal), for specs of
what the store does with them."""

from perdure.domain.ui import UIMessage
from perdure.testing.chat_client import user_message
from storage.intake import NewSubmission


def user_submission(
    chat_id: str,
    text: str,
    *,
    key: str,
    tenant_id: str = "default",
    agent: str = "default",
    message_id: str | None = None,
) -> NewSubmission:
    """A user message of `text` for the tenant's session `chat_id`, once per `key`."""
    return NewSubmission(
        tenant_id=tenant_id,
        chat_id=chat_id,
        agent=agent,
        message=UIMessage.model_validate(user_message(text, message_id)),
        idempotency_key=key,
    )
