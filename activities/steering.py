"""A model step's boundary: the steering messages that wait for the running turn join it
(storage/steering.py) before the next model request, which sees them after the tool results
they follow; their own turns are told to end without running."""

from collections.abc import Sequence
from dataclasses import dataclass

from activities.step_run import StepRun
from perdure.domain.steering import steered_submissions
from perdure.domain.step_state import StepState
from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.db import Database
from storage.log_appender import LogAppender
from storage.steering import join_steering
from storage.submission_locks import ACTIVE
from storage.submission_reads import get_submission
from storage.tables import SubmissionRow


def at_boundary(run: StepRun, state: StepState) -> bool:
    """A step of this answer has ended and the next has not begun: a message joining here is
    seen by the next request whole, never in the middle of a step's partial."""
    return run.steplog.reduction.steps > 0 and not state.started


@dataclass(frozen=True)
class Steering:
    db: Database
    appender: LogAppender
    lifecycle: SubmissionLifecycle

    async def join(self, run: StepRun) -> None:
        """Append the waiting steering messages to the answer's log (after everything the
        step buffered) and mark them joined, in one transaction; then end their turns."""
        await run.writer.flush()
        message_id = run.step.turn.assistant_message_id
        joined = await join_steering(
            self.db,
            submission_id=run.submission.id,
            session_id=run.step.turn.session_id,
            message_id=message_id,
            writer=run.writer.log_writer,
        )
        if not joined.submissions:
            return
        run.steplog.record(joined.chunks)
        self.appender.announce(message_id)
        await self._end_their_turns(joined.submissions)

    async def end_joined_turns(self, run: StepRun) -> None:
        """A retried step: an earlier attempt may have died between joining messages and
        telling their turns, which would wait for admission forever otherwise."""
        rows: list[SubmissionRow] = []
        for submission_id in steered_submissions(run.steplog.chunks):
            row = await get_submission(self.db, submission_id)
            if row is not None and row.status in ACTIVE:
                rows.append(row)
        await self._end_their_turns(rows)

    async def _end_their_turns(self, rows: Sequence[SubmissionRow]) -> None:
        # Raises when Temporal refuses: the step's retry tells them again (above).
        await self.lifecycle.skip(rows)
