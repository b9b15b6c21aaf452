"""Temporal or the store unreachable at `POST /api/chat`: a quick 503 JSON error with
`Retry-After`, nothing stored and nothing claiming the session, and the next message is
answered as soon as the dependency is back."""

import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import select
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from gateway.app import create_app
from perdure.runtime.temporal_dev import dev_server
from perdure.testing.chat_client import chat_body, counting, key_of, read_stream, send, user_message
from perdure.testing.stack import Stack, free_port, running_stack
from perdure.testing.tcp_proxy import TcpProxy, tcp_proxy
from storage.db import Database
from storage.prompt_schedules import get_schedule
from storage.tables import MessageRow, SubmissionRow
from tests.databases import database_url
from tests.served import STACK_AGENTS

QUICK_503_SECONDS = 2.0
"""An unreachable Temporal fails the gateway's health probe at 0.25 s (the deadline for a live server is 15 s; the
Temporal client alone would retry for 9-10 s)."""


class TemporalServer:
    """A Temporal dev server of this test alone (SQLite file), which it can stop and restart."""

    def __init__(self, directory: Path) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.db_file = directory / "temporal.db"
        self._running: contextlib.AsyncExitStack | None = None

    async def start(self) -> None:
        if self._running is not None:
            return
        running = contextlib.AsyncExitStack()
        await running.enter_async_context(
            dev_server(
                address=self.address,
                ui_port=None,
                db_file=self.db_file,
                namespace="default",
            )
        )
        self._running = running

    async def stop(self) -> None:
        if self._running is not None:
            await self._running.aclose()
            self._running = None


@contextlib.asynccontextmanager
async def stack_on_own_temporal(
    backend: str, directory: Path
) -> AsyncIterator[tuple[Stack, TemporalServer]]:
    temporal = TemporalServer(directory)
    await temporal.start()
    try:
        client = await Client.connect(temporal.address, data_converter=pydantic_data_converter)
        with database_url(backend, directory) as url:
            async with running_stack(
                client=client, database_url=url, data_dir=directory, agents=STACK_AGENTS
            ) as stack:
                try:
                    yield stack, temporal
                finally:
                    await temporal.start()  # the worker needs Temporal to shut down cleanly
    finally:
        await temporal.stop()


async def stored(db: Database, chat_id: str) -> tuple[int, int]:
    """(messages, submissions) of a session, read from the store itself."""
    session_id = key_of(chat_id)
    async with db.read() as session:
        messages = (
            await session.exec(
                select(func.count())
                .select_from(MessageRow)
                .where(MessageRow.session_id == session_id)
            )
        ).one()
        submissions = (
            await session.exec(
                select(func.count())
                .select_from(SubmissionRow)
                .where(SubmissionRow.session_id == session_id)
            )
        ).one()
    return messages, submissions


def assert_unavailable(response: httpx.Response, code: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert int(response.headers["retry-after"]) > 0
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert error["requestId"] == response.headers["x-request-id"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_temporal_unreachable_at_send_is_a_quick_503_that_stores_nothing(
    backend: str, provider_env: None, tmp_path: Path
) -> None:
    async with (
        stack_on_own_temporal(backend, tmp_path) as (stack, temporal),
        httpx.AsyncClient(base_url=stack.url, timeout=60) as http,
    ):
        session = f"down-{uuid.uuid4().hex[:8]}"
        first = await send(http, session, "@count 3")
        assert first.text() == counting(3)
        history = (await http.get(f"/api/chat/{session}/messages")).json()
        await temporal.stop()

        started = time.monotonic()
        refused = await http.post(
            "/api/chat", json=chat_body(session, user_message("@count 4", "m2"))
        )
        waited = time.monotonic() - started
        new_session = f"new-{uuid.uuid4().hex[:8]}"
        refused_new = await http.post(
            "/api/chat", json=chat_body(new_session, user_message("@count 4"))
        )

        assert_unavailable(refused, "temporal_unavailable")
        assert_unavailable(refused_new, "temporal_unavailable")
        assert waited < QUICK_503_SECONDS, f"the 503 took {waited:.1f} s"
        assert (await http.get(f"/api/chat/{session}/messages")).json() == history
        assert await stored(stack.services.db, session) == (2, 1)
        assert (await http.get(f"/v1/sessions/{session}")).json()["status"] == "idle"
        assert (await http.get(f"/v1/sessions/{new_session}")).status_code == 404
        assert await stored(stack.services.db, new_session) == (0, 0)

        await temporal.start()
        back = time.monotonic()
        answered = await send(http, session, "@count 4", message_id="m2")
        answered_in = time.monotonic() - back

        assert answered.status == 200
        assert answered.text() == counting(4)
        assert answered.types()[-1] == "finish"
        assert answered_in < 10, f"answered {answered_in:.1f} s after Temporal was back"
        print(f"503 after {waited:.2f} s; answered {answered_in:.2f} s after Temporal was back")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_temporal_unreachable_at_a_schedule_change_is_a_503_that_changes_nothing(
    backend: str, provider_env: None, tmp_path: Path
) -> None:
    async with (
        stack_on_own_temporal(backend, tmp_path) as (stack, temporal),
        httpx.AsyncClient(base_url=stack.url, timeout=60) as http,
    ):
        body = {"id": "daily", "sessionId": "digest", "prompt": "Hi", "cron": "@daily"}
        assert (await http.post("/v1/schedules", json=body)).status_code == 201
        before = await get_schedule(stack.services.db, tenant_id="default", schedule_id="daily")
        await temporal.stop()

        refused = await http.patch("/v1/schedules/daily", json={"prompt": "Bye", "cron": "@hourly"})

        assert_unavailable(refused, "temporal_unavailable")
        after = await get_schedule(stack.services.db, tenant_id="default", schedule_id="daily")
        assert before is not None and after is not None
        assert (after.prompt, after.spec) == (before.prompt, before.spec)

        await temporal.start()
        changed = await http.patch("/v1/schedules/daily", json={"prompt": "Bye"})
        assert changed.status_code == 200
        assert changed.json()["prompt"] == "Bye"


@contextlib.asynccontextmanager
async def gateway_through_proxy(stack: Stack) -> AsyncIterator[tuple[httpx.AsyncClient, TcpProxy]]:
    """A gateway whose store connections go through a proxy; the worker's do not."""
    url = urlsplit(stack.settings.resolved_database_url())
    async with tcp_proxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url._replace(netloc=f"{url.username}@{proxy.address}").geturl()
        db = Database(proxied)
        app = create_app(services=dataclasses.replace(stack.services, db=db))
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://perdure", timeout=60
            ) as http:
                yield http, proxy
        finally:
            await db.close()


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
async def test_the_store_unreachable_at_send_is_a_quick_503_that_stores_nothing(
    stack: Stack,
) -> None:
    async with gateway_through_proxy(stack) as (http, proxy):
        session = f"store-{uuid.uuid4().hex[:8]}"
        first = await read_stream(
            http, "POST", "/api/chat", json=chat_body(session, user_message("@count 2"))
        )
        assert first.text() == counting(2)
        proxy.refuse()

        started = time.monotonic()
        refused = await http.post(
            "/api/chat", json=chat_body(session, user_message("@count 3", "m2"))
        )
        waited = time.monotonic() - started
        reads = [
            await http.get("/v1/sessions"),
            await http.get(f"/api/chat/{session}/messages"),
            await http.get(f"/api/chat/{session}/stream", headers={"Last-Event-ID": "0"}),
        ]

        assert_unavailable(refused, "store_unavailable")
        assert waited < QUICK_503_SECONDS, f"the 503 took {waited:.1f} s"
        for response in reads:
            assert_unavailable(response, "store_unavailable")
        assert await stored(stack.services.db, session) == (2, 1)

        proxy.restore()
        answered = await read_stream(
            http, "POST", "/api/chat", json=chat_body(session, user_message("@count 3", "m2"))
        )

        assert answered.text() == counting(3)
        assert answered.types()[-1] == "finish"
        print(f"503 after {waited:.2f} s")
