"""`Database.transact`: a write transaction with a blocking session that, on SQLite, runs whole
on a store thread."""

import asyncio
import threading
import uuid

import pytest
from sqlmodel import Session

from storage.db import Database
from storage.tables import ChatSessionRow
from tests.waiting import eventually


def _session_row(session_id: str) -> ChatSessionRow:
    return ChatSessionRow(
        id=session_id,
        tenant_id="t",
        chat_id=session_id,
        agent="a",
        created_at=1.0,
        updated_at=1.0,
    )


async def _stored(store: Database, session_id: str) -> bool:
    async with store.read() as session:
        return await session.get(ChatSessionRow, session_id) is not None


async def test_a_transaction_commits_what_it_wrote_and_returns_its_result(store: Database) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"

    def write(session: Session) -> str:
        session.add(_session_row(session_id))
        return "written"

    assert await store.transact(write) == "written"
    assert await _stored(store, session_id)


async def test_a_transaction_that_raises_leaves_nothing_written(store: Database) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"

    def write(session: Session) -> None:
        session.add(_session_row(session_id))
        session.flush()
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError, match="changed my mind"):
        await store.transact(write)
    assert not await _stored(store, session_id)


async def test_a_caller_cancelled_before_the_commit_gets_its_transaction_rolled_back(
    sqlite_store: Database,
) -> None:
    """On SQLite's store thread (on PostgreSQL the transaction is the caller's own task)."""
    store = sqlite_store
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    flushed, release = threading.Event(), threading.Event()

    def write(session: Session) -> None:
        session.add(_session_row(session_id))
        session.flush()
        flushed.set()
        release.wait(10)

    caller = asyncio.ensure_future(store.transact(write))
    await eventually(flushed.is_set, what="the transaction's first write")
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()  # the transaction reaches its commit with nobody waiting for it

    # The store takes the next transaction (the lock was released), after the rollback.
    def write_other(session: Session) -> bool:
        return session.get(ChatSessionRow, session_id) is not None

    assert await asyncio.wait_for(store.transact(write_other), 10) is False
    assert not await _stored(store, session_id)


async def test_on_sqlite_a_transaction_runs_off_the_callers_thread(store: Database) -> None:
    def where(session: Session) -> int:
        return threading.get_ident()

    ran_on = await store.transact(where)
    assert (ran_on != threading.get_ident()) is store.is_sqlite
