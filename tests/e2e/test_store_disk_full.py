"""The embedded SQLite store's disk full: a new chat is a `503 store_unavailable` with nothing
written, an answer under way is recovered and finishes exactly once space is back, and the
store's file stays whole (docs/recovery.md)."""

import asyncio
import errno
import os
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from perdure.testing.chat_client import chat_body, counting, read_stream, user_message
from perdure.testing.databases import MigratedTemplates
from perdure.testing.stack import running_stack
from tests.databases import migrated_database_url, skip_or_fail
from tests.served import STACK_AGENTS
from tests.waiting import eventually

DISK_BYTES = 16 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of 16 MB of its own (a tmpfs: mounting one needs root)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        skip_or_fail("a full disk is made by mounting a small tmpfs, which needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)], check=True
    )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk`; the file that took them."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    block = b"\0" * 65_536
    try:
        while True:
            os.write(descriptor, block)
    except OSError as full:
        assert full.errno == errno.ENOSPC, full
    finally:
        os.close(descriptor)
    return filler


async def test_a_full_disk_refuses_new_chats_and_the_answer_under_way_finishes_exactly(
    small_disk: Path,
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    store_templates: MigratedTemplates,
    provider_env: None,
) -> None:
    with migrated_database_url(store_templates, "sqlite", small_disk) as url:
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
            filler = fill(small_disk)
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
