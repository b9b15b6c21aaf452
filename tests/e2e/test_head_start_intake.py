"""Which submissions the intake gives a head start (docs/relay.md, "Head start"): a turn admitted
at once, planned from its session's path as the intake transaction left it; not a turn queued
behind a running one, nor one that found other submissions waiting at the intake."""

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any, cast

from temporalio.client import Client

from perdure.turn_control.lifecycle import SubmissionLifecycle
from storage.db import Database
from storage.intake import RecentPath
from storage.tables import SubmissionRow
from tests.submitting import user_submission


class Recorded:
    """A head starter that records what it was asked to start."""

    def __init__(self) -> None:
        self.started: list[tuple[SubmissionRow, RecentPath]] = []

    def start(self, submission: SubmissionRow, recent: RecentPath) -> None:
        self.started.append((submission, recent))

    def cancel(self, submission: SubmissionRow) -> None:
        pass


async def without_temporal(call: Awaitable[Any], *, patient: bool = False) -> None:
    """The lifecycle's Temporal calls, not made: these specs are about the intake alone."""
    cast(Any, call).close()


def lifecycle_of(store: Database, head_start: Recorded, **options: Any) -> SubmissionLifecycle:
    return SubmissionLifecycle(
        store,
        cast(Client, None),
        task_queue="unused",
        deadline=options.pop("deadline", without_temporal),
        head_start=head_start,
        **options,
    )


async def test_an_admitted_turn_is_head_started_from_the_path_with_its_message(
    store: Database,
) -> None:
    head_start, chat = Recorded(), f"head-{uuid.uuid4().hex[:8]}"

    outcome = await lifecycle_of(store, head_start).submit(
        user_submission(chat, "hello there", key=f"{chat}-1")
    )

    ((submission, recent),) = head_start.started
    assert submission.id == outcome.submission.id
    assert [m.role for m in recent.path] == ["user"]
    assert recent.path[-1].parts[0].field("text") == "hello there"


async def test_a_turn_queued_behind_a_running_one_is_not_head_started(store: Database) -> None:
    head_start, chat = Recorded(), f"head-{uuid.uuid4().hex[:8]}"
    lifecycle = lifecycle_of(store, head_start)
    await lifecycle.submit(user_submission(chat, "first", key=f"{chat}-1"))

    queued = await lifecycle.submit(user_submission(chat, "second", key=f"{chat}-2"))

    assert queued.submission.status == "pending"
    assert queued.submission.id not in {s.id for s, _ in head_start.started}
    assert len(head_start.started) == 1


async def test_a_submission_that_found_others_waiting_at_the_intake_is_not_head_started(
    store: Database,
) -> None:
    head_start, release = Recorded(), asyncio.Event()
    chats = [f"head-{uuid.uuid4().hex[:8]}" for _ in range(3)]

    async def held_until_released(call: Awaitable[Any], *, patient: bool = False) -> None:
        cast(Any, call).close()
        await release.wait()

    lifecycle = lifecycle_of(store, head_start, deadline=held_until_released, intake_width=1)
    first = asyncio.create_task(lifecycle.submit(user_submission(chats[0], "a", key="a")))
    await asyncio.sleep(0)  # it takes the gate's one place, and keeps it waiting on "Temporal"
    second = asyncio.create_task(lifecycle.submit(user_submission(chats[1], "b", key="b")))
    await asyncio.sleep(0)
    third = asyncio.create_task(lifecycle.submit(user_submission(chats[2], "c", key="c")))
    await asyncio.sleep(0)
    release.set()
    outcomes = await asyncio.gather(first, second, third)

    started = {submission.id for submission, _ in head_start.started}
    assert [outcome.submission.id in started for outcome in outcomes] == [True, False, True]
