"""A submission's lifecycle, owned here for every submitter (the chat and submissions routes,
scheduled prompts) and every later move of it (the finish admits the next turn, a recovery plan
or a cleared session skips queued ones, the reconciler starts a forgotten one).

The store decides, Temporal is told after: `submit` records the submission and what the
session's concurrency strategy makes of it (stop the running turn, skip queued ones) in one
transaction, then starts its turn and carries those effects out; a turn that cannot be started
has its submission withdrawn, so nothing stays half-written. `finish` ends a turn in one
transaction (its log closed, its answer stored, its session released, the next submission
admitted), then tells the admitted turn to run; a withdrawal admits the next the same way.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Protocol, TypeVar

from temporalio.client import Client

from perdure.domain.names import ADMIT_SIGNAL, SKIP_SIGNAL
from perdure.turn_control.client import TurnStart, cancel_turn, signal_turn, start_turn
from perdure.turn_control.fair_gate import (
    DEFAULT_INTAKE_CONCURRENCY,
    INTAKE_PATIENCE_SECONDS,
    FairGate,
)
from storage.bus import ChunkBus
from storage.busy_session import Effects
from storage.db import Database
from storage.intake import NewSubmission, RecentPath, SubmitOutcome, submit
from storage.stops import StopRecord, record_stop
from storage.submission_locks import ACTIVE
from storage.tables import SubmissionRow
from storage.turn_end import Finished, TurnEnd, end_turn
from storage.withdrawal import withdraw_submission

log = logging.getLogger("perdure.lifecycle")

T = TypeVar("T")


class TemporalDeadline(Protocol):
    """How long a Temporal call may take, and what its failure becomes. The gateway answers a
    request within a second when Temporal is down (a 503); an activity is bounded by its own
    timeouts and retried by Temporal. `patient`: a call made in the background after Temporal
    was found unreachable, which may wait for it to come back."""

    def __call__(self, call: Awaitable[T], *, patient: bool = False) -> Awaitable[T]: ...


class HeadStarter(Protocol):
    """Sends an admitted turn's first provider request while its workflow boots
    (`activities/head_start.py`)."""

    def start(self, submission: SubmissionRow, recent: RecentPath) -> None:
        """In the background, from the session's recent path as admitted; never raises."""
        ...

    def cancel(self, submission: SubmissionRow) -> None:
        """Cancel its head start at the relay, if one was sent, in the background."""
        ...


async def _as_is(call: Awaitable[T], *, patient: bool = False) -> T:
    return await call


class SubmissionLifecycle:
    def __init__(
        self,
        db: Database,
        client: Client,
        *,
        task_queue: str,
        eager_start: bool = False,
        deadline: TemporalDeadline = _as_is,
        bus: ChunkBus | None = None,
        intake_width: int = DEFAULT_INTAKE_CONCURRENCY,
        head_start: HeadStarter | None = None,
    ) -> None:
        self._db = db
        self._head_start = head_start
        self._bus = bus
        """Announces the logs the store closed for a submission that will not run (skipped,
        dropped): their streams, here and in other processes, read them at once."""
        self._client = client
        self._task_queue = task_queue
        self._eager_start = eager_start
        self._deadline = deadline
        self._background: set[asyncio.Task[None]] = set()
        self._intake = FairGate(intake_width)
        """Submissions recorded and started at once, let in round-robin across tenants."""

    async def submit(self, new: NewSubmission) -> SubmitOutcome:
        """Record the submission (once per key) and start its turn. A repeat returns the
        first submission (`created: false`) and starts its turn again, which is a no-op
        unless the first request died before starting it. Tenants take turns: one tenant's
        burst does not hold another's message behind all of it (`fair_gate.py`)."""
        async with self._intake.turn(new.tenant_id, patience=INTAKE_PATIENCE_SECONDS):
            # Behind a backlog the turn's step comes late: a head start would be paid for and
            # may find no step within the relay's claim window.
            head_start = self._head_start is not None and not self._intake.waiting
            outcome = await submit(self._db, new, with_recent_path=head_start)
            await self._start_submitted(outcome)
        return outcome

    async def record(self, new: NewSubmission) -> SubmissionRow:
        """Record a sub-agent's submission (once per key), in the new session its parent's
        tool call opens: its parent's workflow starts its turn as a child workflow."""
        # A child's session is new: no running or queued turn for a strategy to act on.
        return (await submit(self._db, new)).submission

    def _announce(self, submissions: Sequence[SubmissionRow]) -> None:
        if self._bus is not None and submissions:
            self._bus.publish(*(submission.assistant_message_id for submission in submissions))

    async def _start_submitted(self, outcome: SubmitOutcome) -> None:
        submission = outcome.submission
        if outcome.created and submission.status == "skipped":  # dropped at intake
            self._announce([submission])
        if submission.status in ACTIVE:
            if outcome.recent is not None and self._head_start is not None:
                # Sent while the workflow starts: its first step adopts it.
                self._head_start.start(submission, outcome.recent)
            try:
                await self.start(submission, eager=self._eager_start)
            except Exception:
                if outcome.created:  # a repeated request leaves the original's turn alone
                    await self._withdraw(submission)
                raise
        await self._carry_out(outcome.effects)

    async def start(self, submission: SubmissionRow, *, eager: bool = False) -> None:
        """Idempotent: attaches to a running workflow and never restarts a finished one."""
        await self._deadline(
            start_turn(
                self._client, TurnStart.of(submission), task_queue=self._task_queue, eager=eager
            )
        )

    async def admit(self, submission: SubmissionRow, *, patient: bool = False) -> None:
        """Tell the admitted submission's turn to run (starting its workflow if need be)."""
        await self._signal(submission, ADMIT_SIGNAL, patient=patient)

    async def finish(
        self, end: TurnEnd, *, before_next: Callable[[Finished], Awaitable[None]]
    ) -> Finished:
        """End the turn in the store (close its log, store its answer, release its session and
        admit the next, in one transaction), run `before_next` (what the turn's end does before
        the next turn may run), then tell the admitted turn to run. Idempotent: repeated after
        a crash, it changes nothing in the store and signals the same next turn again."""
        finished = await end_turn(self._db, end)
        await before_next(finished)
        if finished.following is not None:
            await self.admit(finished.following)
        return finished

    async def skip(self, submissions: Sequence[SubmissionRow]) -> None:
        """Let the turns of submissions the store ended `skipped` end without running; their
        logs are announced (a recovery plan closed them already)."""
        self._announce(submissions)
        for submission in submissions:
            await self._signal(submission, SKIP_SIGNAL)

    async def stop(
        self, *, session_id: str, submission_id: str | None = None, drop_steering: bool = False
    ) -> StopRecord:
        """Stop the submission (or the session's running turn): record the stop, then cancel
        through Temporal (storage/stops.py says why the record comes first). Once recorded it
        holds: when Temporal cannot take the cancellation now, the turn stops at its next step
        and the reconciler sends the cancellation again, so the answer is still `stopped`.
        `drop_steering`: the steering messages waiting for the stopped turn end unrun."""
        record = await record_stop(
            self._db,
            session_id=session_id,
            submission_id=submission_id,
            drop_steering=drop_steering,
        )
        if record.verdict != "stopped" or record.submission is None:
            return record
        if self._head_start is not None:
            self._head_start.cancel(record.submission)
        try:
            await self.cancel(record.submission.id)
        except Exception as error:  # noqa: BLE001 - the recorded stop holds (see above)
            log.warning(
                "stop of %s recorded; Temporal did not take the cancellation (%s): the turn "
                "stops at its next step",
                record.submission.id,
                error,
            )
        await self._carry_out(Effects(skip=record.dropped_steering))
        return record

    async def cancel(self, submission_id: str) -> None:
        """Cancel the turn's workflow; what it ends as is recorded in the store already (a stop,
        a deleted session, an `interrupt`)."""
        await self._deadline(cancel_turn(self._client, submission_id))

    async def _signal(
        self, submission: SubmissionRow, signal: str, *, patient: bool = False
    ) -> None:
        call = signal_turn(
            self._client, TurnStart.of(submission), task_queue=self._task_queue, signal=signal
        )
        await self._deadline(call, patient=patient)

    async def _carry_out(self, effects: Effects) -> None:
        """What the session's concurrency strategy (or a stop's `drop_steering`) asked: stop
        the running turn, skip queued ones. Both are recorded in the store already (a marked
        submission is never admitted), so a failure here leaves a turn running to its end,
        never a wrong one started."""
        calls = [partial(self.cancel, submission_id) for submission_id in effects.cancel]
        calls += [partial(self._signal, row, SKIP_SIGNAL) for row in effects.skip]
        for call in calls:
            try:
                await call()
            except Exception as error:  # noqa: BLE001 - logged; the submission itself is taken
                log.warning("concurrency strategy: %s", error)

    async def _withdraw(self, submission: SubmissionRow) -> None:
        """Undo an intake whose turn could not be started. The submission admitted in its
        place is signalled in the background: Temporal was unreachable a moment ago."""
        try:
            withdrawal = await withdraw_submission(self._db, submission_id=submission.id)
        except Exception:  # the store failed too: the reconciler will start the turn later
            log.exception("could not withdraw submission %s", submission.id)
            return
        if withdrawal.admitted is not None:
            task = asyncio.create_task(self._admit_in_background(withdrawal.admitted))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _admit_in_background(self, submission: SubmissionRow) -> None:
        try:
            await self.admit(submission, patient=True)
        except Exception as error:  # noqa: BLE001 - best effort: logged, never raised
            log.warning("could not admit submission %s: %s", submission.id, error)
