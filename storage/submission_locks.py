"""A submission's rows locked in the one order every writer takes them: its session, then the
submission (intake locks the session, then changes the running submission; the other order
can deadlock with an `interrupt` intake on PostgreSQL)."""

from sqlmodel import Session, select

from storage.tables import ChatSessionRow, SubmissionRow

ACTIVE = ("pending", "running")
"""A submission's statuses until its turn has ended."""


def locked_session(session: Session, session_id: str) -> ChatSessionRow | None:
    result = session.exec(
        select(ChatSessionRow).where(ChatSessionRow.id == session_id).with_for_update()
    )
    return result.first()


def locked_chat(session: Session, tenant_id: str, chat_id: str) -> ChatSessionRow | None:
    """The tenant's session a client knows by `chat_id`, locked (as `locked_session`)."""
    result = session.exec(
        select(ChatSessionRow)
        .where(ChatSessionRow.tenant_id == tenant_id, ChatSessionRow.chat_id == chat_id)
        .with_for_update()
    )
    return result.first()


def locked_submission(session: Session, submission_id: str) -> SubmissionRow | None:
    result = session.exec(
        select(SubmissionRow).where(SubmissionRow.id == submission_id).with_for_update()
    )
    return result.first()


def locked_with_session(
    session: Session, submission_id: str, session_id: str | None = None
) -> tuple[ChatSessionRow | None, SubmissionRow | None]:
    """The submission and its session, both locked, the session first. `session_id` when the
    caller knows it (saves a read); else it is looked up."""
    if session_id is None:
        session_id = (
            session.exec(select(SubmissionRow.session_id).where(SubmissionRow.id == submission_id))
        ).first()
        if session_id is None:
            return None, None
    chat = locked_session(session, session_id)
    return chat, locked_submission(session, submission_id)
