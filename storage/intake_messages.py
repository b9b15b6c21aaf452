"""The messages an intake checks in a session: the stored one a regenerate, an edit or a
continue goes back to, and whether a new message's id is free."""

from sqlmodel import Session, col, select

from perdure.domain.ui import UIMessage
from storage.errors import MessageConflict
from storage.submission_locks import ACTIVE
from storage.tables import ChatSessionRow, MessageRow, SubmissionRow


def message_id_taken(session: Session, session_id: str, message_id: str) -> bool:
    """Stored, or carried by a submission whose turn has not ended."""
    if session.get(MessageRow, (session_id, message_id)) is not None:
        return True
    queued = session.exec(
        select(SubmissionRow.id).where(
            SubmissionRow.session_id == session_id,
            SubmissionRow.user_message_id == message_id,
            col(SubmissionRow.status).in_(ACTIVE),
        )
    )
    return queued.first() is not None


def stored_user_message(session: Session, chat: ChatSessionRow, message_id: str) -> MessageRow:
    stored = session.get(MessageRow, (chat.id, message_id))
    if stored is None or stored.role != "user":
        raise MessageConflict(f"no stored user message {message_id!r} in session {chat.chat_id!r}")
    return stored


def as_ui_message(stored: MessageRow) -> UIMessage:
    return UIMessage.model_validate(
        {
            "id": stored.id,
            "role": stored.role,
            "parts": stored.parts,
            "metadata": stored.meta or None,
        }
    )


def last_answer(session: Session, chat: ChatSessionRow) -> UIMessage:
    """The assistant message a `continue_last` turn goes on from: the active path's last."""
    last = (
        session.get(MessageRow, (chat.id, chat.leaf_message_id)) if chat.leaf_message_id else None
    )
    if last is None or last.role != "assistant":
        raise MessageConflict(
            f"session {chat.chat_id!r} has no answer to continue: its last message is not an "
            "assistant's"
        )
    return as_ui_message(last)
