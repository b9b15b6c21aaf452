"""What a model step reads before it calls the provider, in one read."""

from dataclasses import dataclass

from sqlmodel import Session

from perdure.domain.ui import Chunk, UIMessage
from storage.chunks import chunks_after
from storage.db import Database
from storage.messages import recent_path_of
from storage.steering import steering_waits
from storage.tables import SubmissionRow


@dataclass
class StepInputs:
    submission: SubmissionRow
    log: list[Chunk]
    """The answer's log, when read (a retry reads it only after its claim)."""
    path: list[UIMessage]
    """The session's active path up to the user's message, after what `summary` covers."""
    summary: str | None = None
    """The newest compaction summary on the path (the model sees it instead of the older
    messages, which are therefore not read)."""
    steering_waits: bool = False
    """A steering message waits in the session (storage/steering.py): the step's next
    boundary joins it."""


async def read_again(db: Database, *, submission_id: str, session_id: str) -> StepInputs | None:
    """What a step reads again after a tool round it ran (a stop recorded meanwhile, a steering
    message sent meanwhile), in one read; the log and the path are not read again."""

    def read(session: Session) -> StepInputs | None:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            return None
        return StepInputs(submission, [], [], steering_waits=steering_waits(session, session_id))

    return await db.read_sync(read)


async def read_step_inputs(
    db: Database, *, submission_id: str, message_id: str, session_id: str, with_log: bool
) -> StepInputs | None:
    """The submission, the answer's log (`with_log`) and the active path after its newest
    summary, in one read (one hop to a thread on SQLite, where each read costs one). None when
    the submission is gone."""

    def read(session: Session) -> StepInputs | None:
        submission = session.get(SubmissionRow, submission_id)
        if submission is None:
            return None
        log = (
            [chunk for _, chunk in chunks_after(session, message_id=message_id, after=-1)]
            if with_log
            else []
        )
        summary, path = recent_path_of(session, session_id=session_id)
        return StepInputs(submission, log, path, summary, steering_waits(session, session_id))

    return await db.read_sync(read)
