"""What a model step reads before it calls the provider, in one read."""

from dataclasses import dataclass

from sqlmodel import Session

from domain.ui import Chunk, UIMessage
from storage.chunks import chunks_after
from storage.db import Database
from storage.messages import path_of
from storage.tables import Submission


@dataclass
class StepInputs:
    submission: Submission
    log: list[Chunk]
    """The answer's log, when read (a retry reads it only after its claim)."""
    path: list[UIMessage]
    """The session's active path: the conversation up to the user's message."""


async def read_step_inputs(
    db: Database, *, submission_id: str, message_id: str, session_id: str, with_log: bool
) -> StepInputs | None:
    """The submission, the answer's log (`with_log`) and the active path, in one read (one hop
    to a thread on SQLite, where three reads cost three). None when the submission is gone."""

    def read(session: Session) -> StepInputs | None:
        submission = session.get(Submission, submission_id)
        if submission is None:
            return None
        log = (
            [chunk for _, chunk in chunks_after(session, message_id=message_id, after=-1)]
            if with_log
            else []
        )
        return StepInputs(submission, log, path_of(session, session_id=session_id))

    return await db.read_sync(read)
