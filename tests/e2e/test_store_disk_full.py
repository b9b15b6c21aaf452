"""The embedded SQLite store's disk full: a new chat is a `503 store_unavailable` with nothing
written, an answer under way is recovered and finishes exactly once space is back, and the
store's file stays whole (docs/recovery.md)."""

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from perdure.testing.chat_client import chat_body, counting, read_stream, user_message
from perdure.testing.databases import MigratedTemplates
from perdure.testing.small_disk import disk_unavailable, fill, small_disk
from perdure.testing.stack import running_stack
from tests.databases import migrated_database_url, skip_or_fail
from tests.served import STACK_AGENTS
from tests.waiting import eventually


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of 16 MB of its own."""
    if (why := disk_unavailable()) is not None:
        skip_or_fail(why)
    with small_disk(tmp_path) as mounted:
        yield mounted


async def test_a_full_disk_refuses_new_chats_and_the_answer_under_way_finishes_exactly(
    disk: Path,
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    store_templates: MigratedTemplates,
    provider_env: None,
) -> None:
    with migrated_database_url(store_templates, "sqlite", disk) as url:
        async with (
            running_stack(
                client=temporal_env.client,
                database_url=url,
                data_dir=tmp_path / "data",
                agents=STACK_AGENTS,
            ) as stack,
            httpx.AsyncClient(base_url=stack.url, timeout=60) as http,
        ):
            running, refused_chat = f"full-{uuid.uuid4().hex[:8]}", f"new-{uuid.uuid4().hex[:8]}"
            answer = asyncio.create_task(
                read_stream(
                    http,
                    "POST",
                    "/api/chat",
                    json=chat_body(running, user_message(f"@count 80 @delay 50 {running}")),
                )
            )

            async def under_way() -> bool:
                info = await http.get(f"/v1/sessions/{running}")
                return info.status_code == 200 and info.json()["status"] == "running"

            await eventually(under_way, what="the answer under way")
            filler = fill(disk)
            refused = await http.post(
                "/api/chat", json=chat_body(refused_chat, user_message("hello"))
            )
            filler.unlink()
            streamed = await answer
            missing = await http.get(f"/v1/sessions/{refused_chat}")
        with sqlite3.connect(url.removeprefix("sqlite:///")) as store:
            integrity = store.execute("PRAGMA integrity_check").fetchall()

    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "store_unavailable"
    assert refused.headers["retry-after"]
    assert missing.status_code == 404  # nothing of the refused chat was written
    assert streamed.text() == counting(80)
    assert integrity == [("ok",)]
