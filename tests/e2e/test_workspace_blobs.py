"""Large workspace contents in the blob directory (docs/workspace.md#large-files): read
back whole by the files API and the tools, never named by a row before they are on disk,
shared by a fork, and swept once no file names them."""

import asyncio
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest

from perdure.domain.workspace_rules import WorkspaceLimits
from perdure.testing.chat_client import send
from perdure.testing.stack import BLOB_MIN_BYTES, Stack
from storage.db import Database
from storage.session_keys import session_key
from storage.workspace_blobs import BlobDirectory
from storage.workspace_tables import WorkspaceFileRow
from storage.workspaces import change_file, read_file, read_files, sweep_blobs
from tests.e2e.test_reconciler import reconcile_now
from tests.e2e.test_workspace_tools import call, output


def blobs_of(stack: Stack) -> BlobDirectory:
    blobs = stack.services.settings.workspace_blobs()
    assert blobs is not None
    return blobs


def large_text(marker: str) -> str:
    """A text past the stack's blob threshold: numbered lines, one of them `marker`."""
    lines = [f"line {n}: {'x' * 60}" for n in range(1, BLOB_MIN_BYTES // 60 + 100)]
    lines[500] = marker
    return "\n".join(lines) + "\n"


async def new_chat(http: httpx.AsyncClient) -> str:
    chat = f"blobs-{uuid.uuid4().hex[:12]}"
    await send(http, chat, "@count 1", agent="workspace")
    return chat


async def blob_of(stack: Stack, chat: str, path: str) -> str | None:
    """The blob a file's row names (None: its content is in the row)."""
    async with stack.services.db.read() as session:
        row = await session.get(WorkspaceFileRow, (session_key("default", chat), path))
    assert row is not None
    assert row.blob is None or row.content == b""
    return row.blob


def blob_file(stack: Stack, name: str) -> Path:
    return blobs_of(stack).path / name[:2] / name


async def test_a_large_file_is_kept_in_the_blob_directory_and_read_back_whole(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = await new_chat(http)
    content = large_text("the marker").encode()

    written = await http.put(f"/v1/sessions/{chat}/files/big.txt", content=content)
    read = await http.get(f"/v1/sessions/{chat}/files/big.txt")
    small = await http.put(f"/v1/sessions/{chat}/files/small.txt", content=b"small")

    assert written.status_code == 201, written.text
    name = await blob_of(stack, chat, "big.txt")
    assert name is not None
    assert blob_file(stack, name).read_bytes() == content
    assert read.content == content
    assert read.headers["etag"] == '"1"'
    assert small.status_code == 201
    assert await blob_of(stack, chat, "small.txt") is None
    listed = (await http.get(f"/v1/sessions/{chat}/files")).json()
    assert {f["path"]: f["size"] for f in listed["files"]} == {
        "big.txt": len(content),
        "small.txt": 5,
    }


async def test_the_tools_read_edit_and_grep_a_large_file(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = await new_chat(http)
    await http.put(f"/v1/sessions/{chat}/files/big.txt", content=large_text("needle here"))
    before = await blob_of(stack, chat, "big.txt")

    turn = await send(
        http,
        chat,
        "\n".join(
            [
                call("read_file", path="big.txt", start_line=501, end_line=501),
                call("edit_file", path="big.txt", old_text="needle here", new_text="thread"),
                call("grep", pattern="^thread$"),
            ]
        ),
        agent="workspace",
    )

    assert output(turn, "read_file")["content"] == "needle here\n"
    assert "-needle here\n+thread\n" in output(turn, "edit_file")["diff"]
    assert output(turn, "grep")["matches"] == ["big.txt:501: thread"]
    after = await blob_of(stack, chat, "big.txt")
    assert after is not None and after != before  # a blob is never changed in place
    read = (await http.get(f"/v1/sessions/{chat}/files/big.txt")).text
    assert read == large_text("thread")


async def test_a_sweep_deletes_the_blobs_no_file_names_and_keeps_the_rest(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    kept_chat, deleted_chat = await new_chat(http), await new_chat(http)
    files = f"/v1/sessions/{kept_chat}/files"
    await http.put(f"{files}/a.txt", content=large_text("first"))
    overwritten = await blob_of(stack, kept_chat, "a.txt")
    await http.put(f"{files}/a.txt", content=large_text("second"))
    await http.put(f"{files}/b.txt", content=large_text("deleted"))
    file_deleted = await blob_of(stack, kept_chat, "b.txt")
    await http.delete(f"{files}/b.txt")
    await http.put(f"/v1/sessions/{deleted_chat}/files/c.txt", content=large_text("gone"))
    session_deleted = await blob_of(stack, deleted_chat, "c.txt")
    await http.delete(f"/v1/sessions/{deleted_chat}")
    unnamed = [overwritten, file_deleted, session_deleted]
    assert all(name is not None for name in unnamed)

    within_grace = await sweep_blobs(stack.services.db, blobs_of(stack))
    assert all(blob_file(stack, str(name)).exists() for name in unnamed)

    swept = await sweep_blobs(stack.services.db, blobs_of(stack), grace=0)

    assert within_grace == 0
    assert swept >= 3
    assert not any(blob_file(stack, str(name)).exists() for name in unnamed)
    assert (await http.get(f"{files}/a.txt")).text == large_text("second")


async def test_a_fork_shares_the_blob_and_keeps_it_after_its_parent_is_deleted(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = await new_chat(http)
    await http.put(f"/v1/sessions/{chat}/files/big.txt", content=large_text("shared"))
    leaf = (await http.get(f"/api/chat/{chat}/messages")).json()[-1]["id"]
    fork = (await http.post(f"/v1/sessions/{chat}/fork", json={"messageId": leaf})).json()["id"]

    await http.delete(f"/v1/sessions/{chat}")
    await sweep_blobs(stack.services.db, blobs_of(stack), grace=0)

    assert (await http.get(f"/v1/sessions/{fork}/files/big.txt")).text == large_text("shared")


async def test_a_blob_this_process_cannot_find_is_a_503_that_says_why(
    http: httpx.AsyncClient, stack: Stack, tmp_path: Path
) -> None:
    chat = await new_chat(http)
    await http.put(f"/v1/sessions/{chat}/files/big.txt", content=large_text("elsewhere"))
    name = await blob_of(stack, chat, "big.txt")
    assert name is not None
    moved = tmp_path / name
    blob_file(stack, name).rename(moved)  # as if the writer had another blob directory
    try:
        read = await http.get(f"/v1/sessions/{chat}/files/big.txt")
    finally:
        moved.rename(blob_file(stack, name))

    assert read.status_code == 503
    assert read.json()["error"]["code"] == "blob_missing"
    assert "PERDURE_WORKSPACE_BLOB_DIR" in read.json()["error"]["message"]
    assert (await http.get(f"/v1/sessions/{chat}/files/big.txt")).status_code == 200


async def test_the_reconciler_sweeps_blobs_an_hour_after_no_file_names_them(
    http: httpx.AsyncClient, stack: Stack
) -> None:
    chat = await new_chat(http)
    files = f"/v1/sessions/{chat}/files"
    await http.put(f"{files}/a.txt", content=large_text("old"))
    old = await blob_of(stack, chat, "a.txt")
    await http.put(f"{files}/a.txt", content=large_text("new"))
    live = await blob_of(stack, chat, "a.txt")
    assert old is not None and live is not None
    two_hours_ago = time.time() - 7200
    for name in (old, live):
        os.utime(blob_file(stack, name), (two_hours_ago, two_hours_ago))

    report = await reconcile_now(stack)

    assert report.swept_blobs >= 1
    assert not blob_file(stack, old).exists()
    assert (await http.get(f"{files}/a.txt")).text == large_text("new")


async def test_a_read_that_lost_a_race_with_a_change_and_a_sweep_reads_the_row_again(
    store: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reading a file's row and its blob, the file is changed and the old blob swept:
    the read goes back to the row, for one file and for many (grep's read) alike."""
    blobs = BlobDirectory(tmp_path, min_bytes=1)
    limits = WorkspaceLimits(max_file_bytes=1000, max_total_bytes=10_000, max_files=10)
    loop = asyncio.get_running_loop()

    def write(content: bytes) -> None:
        changed = change_file(
            store, tenant_id="t", session_id="s", path="a.txt", change=lambda _: content,
            limits=limits, blobs=blobs,
        )  # fmt: skip
        asyncio.run_coroutine_threadsafe(changed, loop).result()

    real_get = BlobDirectory.get
    races = iter([b"version 2", b"version 3"])
    race_next = False

    def racing_get(self: BlobDirectory, name: str) -> bytes:
        nonlocal race_next
        if race_next:  # the row was read: now the file changes and its old blob is swept
            race_next = False
            write(next(races))
            (self.path / name[:2] / name).unlink()
        return real_get(self, name)

    await change_file(
        store, tenant_id="t", session_id="s", path="a.txt", change=lambda _: b"version 1",
        limits=limits, blobs=blobs,
    )  # fmt: skip
    monkeypatch.setattr(BlobDirectory, "get", racing_get)

    race_next = True
    one = await read_file(store, session_id="s", path="a.txt", blobs=blobs)
    race_next = True
    many = await read_files(store, session_id="s", matching=lambda _: True, blobs=blobs)

    assert (one.content, one.version) == (b"version 2", 2)
    assert many == {"a.txt": b"version 3"}
