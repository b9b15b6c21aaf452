"""Withdrawing a submission whose turn could not be started (the gateway's answer to an
unreachable Temporal): one transaction that leaves the session as if it had never been sent,
releasing and admitting as `finish` does."""

import uuid

import httpx
from sqlmodel import select

from perdure.testing.chat_client import key_of, send
from perdure.testing.stack import Stack
from storage.db import Database
from storage.intake import SubmitOutcome, submit
from storage.sessions import delete_session
from storage.tables import ChatSessionRow, ChunkRow, MessageRow, SubmissionRow
from storage.timing import now
from storage.withdrawal import withdraw_submission
from tests.submitting import user_submission


def new_session() -> str:
    return f"withdraw-{uuid.uuid4().hex[:8]}"


async def submit_text(db: Database, session_id: str, message_id: str) -> SubmitOutcome:
    return await submit(
        db,
        user_submission(session_id, message_id, key=f"message:{message_id}", message_id=message_id),
    )


async def session_state(
    db: Database, session_id: str
) -> tuple[ChatSessionRow | None, dict[str, str | None], dict[str, str]]:
    """(the session, {message id: parent id}, {submission id: status})."""
    key = key_of(session_id)
    async with db.read() as session:
        chat = await session.get(ChatSessionRow, key)
        messages = (
            await session.exec(select(MessageRow).where(MessageRow.session_id == key))
        ).all()
        submissions = (
            await session.exec(select(SubmissionRow).where(SubmissionRow.session_id == key))
        ).all()
    return (
        chat,
        {m.id: m.parent_id for m in messages},
        {s.id: s.status for s in submissions},
    )


async def test_withdrawing_an_admitted_submission_restores_the_leaf_and_admits_the_next(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    db = stack.services.db
    session_id = new_session()
    earlier = await send(http, session_id, "@count 1", message_id="m1")
    answer = earlier.chunks[0]["messageId"]
    _, _, before = await session_state(db, session_id)
    second = (await submit_text(db, session_id, "m2")).submission
    third = (await submit_text(db, session_id, "m3")).submission
    assert (second.status, third.status) == ("running", "pending")

    withdrawal = await withdraw_submission(db, submission_id=second.id)

    chat, messages, submissions = await session_state(db, session_id)
    assert withdrawal.withdrawn
    assert withdrawal.admitted is not None and withdrawal.admitted.id == third.id
    assert chat is not None
    assert chat.running_submission_id == third.id
    assert chat.leaf_message_id == "m3"
    assert messages == {"m1": None, answer: "m1", "m3": answer}
    assert submissions == {**before, third.id: "running"}

    again = await withdraw_submission(db, submission_id=third.id)

    chat, messages, submissions = await session_state(db, session_id)
    assert again.withdrawn and again.admitted is None
    assert chat is not None
    assert (chat.running_submission_id, chat.leaf_message_id) == (None, answer)
    assert messages == {"m1": None, answer: "m1"}
    assert submissions == before


async def test_withdrawing_a_queued_submission_leaves_the_running_turn_alone(
    stack: Stack,
) -> None:
    db = stack.services.db
    session_id = new_session()
    running = (await submit_text(db, session_id, "m1")).submission
    queued = (await submit_text(db, session_id, "m2")).submission

    withdrawal = await withdraw_submission(db, submission_id=queued.id)

    chat, messages, submissions = await session_state(db, session_id)
    assert withdrawal.withdrawn and withdrawal.admitted is None
    assert chat is not None
    assert (chat.running_submission_id, chat.leaf_message_id) == (running.id, "m1")
    assert messages == {"m1": None}
    assert submissions == {running.id: "running"}
    await withdraw_submission(db, submission_id=running.id)


async def test_withdrawing_the_first_submission_of_a_new_session_deletes_the_session(
    stack: Stack,
) -> None:
    db = stack.services.db
    session_id = new_session()
    first = (await submit_text(db, session_id, "m1")).submission

    withdrawal = await withdraw_submission(db, submission_id=first.id)

    assert withdrawal.withdrawn
    assert await session_state(db, session_id) == (None, {}, {})


async def test_a_submission_whose_log_has_begun_is_not_withdrawn(stack: Stack) -> None:
    db = stack.services.db
    session_id = new_session()
    first = (await submit_text(db, session_id, "m1")).submission
    async with db.write() as session:
        session.add(
            ChunkRow(
                message_id=first.assistant_message_id,
                seq=0,
                body={"type": "start", "messageId": first.assistant_message_id},
                created_at=now(),
            )
        )

    withdrawal = await withdraw_submission(db, submission_id=first.id)

    chat, messages, submissions = await session_state(db, session_id)
    assert not withdrawal.withdrawn
    assert chat is not None and chat.running_submission_id == first.id
    assert messages == {"m1": None}
    assert submissions == {first.id: "running"}
    await delete_session(db, tenant_id="default", session_id=key_of(session_id))
