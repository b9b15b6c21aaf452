"""`Database.transact`: a write transaction that, on SQLite, runs whole off the caller's loop."""

import asyncio
import threading
import uuid

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from storage.db import Database
from storage.tables import ChatSessionRow


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

    async def write(session: AsyncSession) -> str:
        session.add(_session_row(session_id))
        return "written"

    assert await store.transact(write) == "written"
    assert await _stored(store, session_id)


async def test_a_transaction_that_raises_leaves_nothing_written(store: Database) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"

    async def write(session: AsyncSession) -> None:
        session.add(_session_row(session_id))
        await session.flush()
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError, match="changed my mind"):
        await store.transact(write)
    assert not await _stored(store, session_id)


async def test_a_cancelled_caller_rolls_its_transaction_back(store: Database) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    flushed = threading.Event()

    async def write(session: AsyncSession) -> None:
        session.add(_session_row(session_id))
        await session.flush()
        flushed.set()
        await asyncio.sleep(30)

    caller = asyncio.ensure_future(store.transact(write))
    while not flushed.is_set():
        await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller

    for _ in range(100):  # the rollback happens on the store's loop
        if not await _stored(store, session_id):
            break
        await asyncio.sleep(0.02)
    assert not await _stored(store, session_id)

    # And the store takes the next transaction (the lock was released).
    async def write_again(session: AsyncSession) -> None:
        session.add(_session_row(session_id))

    await asyncio.wait_for(store.transact(write_again), 10)
    assert await _stored(store, session_id)


async def test_on_sqlite_a_transaction_runs_off_the_callers_thread(store: Database) -> None:
    async def where(session: AsyncSession) -> int:
        return threading.get_ident()

    ran_on = await store.transact(where)
    assert (ran_on != threading.get_ident()) is store.is_sqlite
