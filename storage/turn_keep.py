"""What a turn keeps on its submission for its later steps: the agent's stash, and a recovery
boot plan's history."""

import json
from typing import Any

from storage.db import Database
from storage.tables import SubmissionRow

MAX_BOOT_HISTORY_BYTES = 1_000_000


async def save_stash(db: Database, *, submission_id: str, data: object) -> None:
    async with db.write() as session:
        submission = await session.get(SubmissionRow, submission_id)
        if submission is None:
            raise LookupError(f"submission {submission_id} not found")
        submission.stash = data
        session.add(submission)


async def save_boot_history(
    db: Database, *, submission_id: str, messages: list[dict[str, Any]]
) -> bool:
    """Keep a recovery boot plan's history for the turn's later steps; False (nothing kept)
    when it is over `MAX_BOOT_HISTORY_BYTES` of JSON."""
    if len(json.dumps(messages, separators=(",", ":"))) > MAX_BOOT_HISTORY_BYTES:
        return False
    async with db.write() as session:
        submission = await session.get(SubmissionRow, submission_id)
        if submission is None:
            return False
        submission.boot_history = messages
        session.add(submission)
    return True
