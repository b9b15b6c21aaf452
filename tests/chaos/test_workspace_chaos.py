"""A worker SIGKILLed amid workspace writes (docs/workspace.md): every call's change applies
exactly once, whether the worker died before the change, after it committed but before the
call's result was logged (the retry answers what was recorded), or after both. A call whose
model step the kill interrupted while it was streaming the call is repaired and never runs."""

import asyncio
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, create_engine, func, select
from sqlmodel import col

from perdure.domain.repair import INTERRUPTED_TOOL_TEXT
from perdure.testing.chat_client import chat_body, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until
from storage.urls import sync_url
from storage.workspace_tables import WorkspaceFileRow

CHATS = 20
KILL_AFTER = 5
"""Writes committed when the worker is killed: the others are before, amid or after theirs."""


@pytest.fixture
def cluster_and_store(cluster: Cluster) -> Iterator[tuple[Cluster, Engine]]:
    engine = create_engine(sync_url(cluster.env["PERDURE_DATABASE_URL"]))
    try:
        yield cluster, engine
    finally:
        engine.dispose()


def committed(engine: Engine, tag: str) -> int:
    with engine.connect() as connection:
        found = connection.execute(
            select(func.count()).where(col(WorkspaceFileRow.path).startswith(tag))
        )
        return int(found.scalar_one())


async def test_a_worker_killed_amid_workspace_writes_applies_each_exactly_once(
    cluster_and_store: tuple[Cluster, Engine],
) -> None:
    cluster, engine = cluster_and_store
    tag = f"kill-{uuid.uuid4().hex[:6]}"
    chats = [f"{tag}-{n}" for n in range(CHATS)]
    streams = {chat: LiveStream() for chat in chats}
    async with cluster.temporal():
        worker = cluster.worker()
        url = await cluster.gateway()
        async with httpx.AsyncClient(base_url=url, timeout=180) as http:

            async def chat_turn(chat: str) -> None:
                call = {"path": f"{chat}.txt", "content": f"written by {chat}\n"}
                text = f"@tool write_file {json.dumps(call)}"
                body = chat_body(chat, user_message(text), agent="workspace")
                async with http.stream("POST", "/api/chat", json=body) as response:
                    await streams[chat].read(response)

            turns = [asyncio.create_task(chat_turn(chat)) for chat in chats]
            await wait_until(lambda: committed(engine, tag) >= KILL_AFTER, timeout=120)
            worker.kill()
            cluster.worker()
            await asyncio.wait_for(asyncio.gather(*turns), timeout=180)

        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            listings = {
                chat: (await http.get(f"/v1/sessions/{chat}/files")).json() for chat in chats
            }

    applied = 0
    for chat in chats:
        events = [chunk for _, chunk in streams[chat].events]
        settled = [c for c in events if c["type"] in ("tool-output-available", "tool-output-error")]
        listing = listings[chat]
        if [c["type"] for c in settled] == ["tool-output-error"]:
            # The kill interrupted the model step while it streamed this call: the call is
            # repaired and never run (docs/recovery.md, "Tools"), so nothing was written.
            assert settled[0]["errorText"] == INTERRUPTED_TOOL_TEXT, (chat, settled)
            assert listing["files"] == [], (chat, listing)
            continue
        assert [c["type"] for c in settled] == ["tool-output-available"], (chat, settled)
        assert (settled[0]["output"]["version"], settled[0]["output"]["created"]) == (1, True)
        assert listing["version"] == 1, (chat, listing)
        assert [(f["path"], f["version"]) for f in listing["files"]] == [(f"{chat}.txt", 1)]
        applied += 1
    assert applied >= KILL_AFTER  # the writes committed before the kill are among them
