"""Migrations over a store that holds data, on SQLite and PostgreSQL."""

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from storage.db import Database
from storage.intake import submit
from storage.messages import active_path
from storage.migrate import migrate
from storage.session_keys import session_key
from storage.sessions import get_session, list_sessions
from storage.tables import ChatSessionRow, MessageRow
from storage.urls import sync_url
from tests.databases import database_url
from tests.submitting import user_submission


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database_url(request.param, tmp_path) as made:
        yield made


def _insert(url: str, *statements: sa.Executable) -> None:
    engine = sa.create_engine(sync_url(url))
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(statement)
    finally:
        engine.dispose()


async def test_a_session_stored_before_tenant_chat_ids_keeps_working(url: str) -> None:
    await asyncio.to_thread(migrate, url, to="0007")
    # a chat as revision 0007 stored it: its key is the chat id the client chose
    await asyncio.to_thread(
        _insert,
        url,
        sa.insert(ChatSessionRow.__table__).values(  # type: ignore[attr-defined]
            id="legacy",
            tenant_id="alpha",
            title="old",
            agent="default",
            leaf_message_id="m1",
            next_queue_seq=1,
            created_at=1.0,
            updated_at=1.0,
        ),
        sa.insert(MessageRow.__table__).values(  # type: ignore[attr-defined]
            session_id="legacy",
            id="m1",
            role="user",
            parts=[{"type": "text", "text": "m1"}],
            meta={},
            status="completed",
            created_at=1.0,
        ),
    )

    await asyncio.to_thread(migrate, url)
    db = Database(url)
    try:
        found = await get_session(db, tenant_id="alpha", chat_id="legacy")
        ours = await submit(
            db,
            user_submission("legacy", "m2", key="k", tenant_id="alpha", message_id="m2"),
        )
        theirs = await submit(
            db,
            user_submission("legacy", "b1", key="k", tenant_id="beta", message_id="b1"),
        )
        path = await active_path(db, session_id="legacy")
        listed = [
            [chat.chat_id for chat in (await list_sessions(db, tenant_id=t, limit=10, offset=0))[0]]
            for t in ("alpha", "beta")
        ]
        async with db.read() as session:
            beta_row = await session.get(ChatSessionRow, session_key("beta", "legacy"))
        with pytest.raises(IntegrityError):  # one chat id per tenant
            async with db.write() as session:
                session.add(
                    ChatSessionRow(
                        id="another-key",
                        tenant_id="alpha",
                        chat_id="legacy",
                        agent="default",
                        created_at=2.0,
                        updated_at=2.0,
                    )
                )
    finally:
        await db.close()

    assert found is not None and (found.id, found.chat_id, found.title) == (
        "legacy",
        "legacy",
        "old",
    )
    assert ours.created and ours.submission.session_id == "legacy"
    assert [m.id for m in path] == ["m1", "m2"]
    assert theirs.created and theirs.submission.session_id == session_key("beta", "legacy")
    assert beta_row is not None and beta_row.chat_id == "legacy"
    assert listed == [["legacy"], ["legacy"]]


def test_a_migrated_sqlite_file_is_in_wal_mode(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'perdure.db'}"

    migrate(url)

    with sqlite3.connect(tmp_path / "perdure.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_connections_opening_a_freshly_migrated_sqlite_file_at_once_all_succeed(
    tmp_path: Path,
) -> None:
    """A file still in rollback mode fails about one such burst in five with "database is
    locked": two connections switching it to WAL at once deadlock."""
    for burst in range(20):
        url = f"sqlite:///{tmp_path / f'perdure-{burst}.db'}"
        migrate(url)
        databases = [Database(url) for _ in range(6)]
        try:

            async def count_sessions(db: Database) -> int:
                async with db.read() as session:
                    return len((await session.exec(sa.select(ChatSessionRow.id))).all())

            counts = await asyncio.gather(*(count_sessions(db) for db in databases))
        finally:
            await asyncio.gather(*(db.close() for db in databases))
        assert counts == [0] * 6
