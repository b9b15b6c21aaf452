import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from perdure.runtime.settings import ApiKeys
from perdure.testing.databases import MigratedTemplates
from perdure.testing.stack import Stack, delete_stored_keys
from storage.db import Database
from tests.databases import migrated_database_url

Gateway = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def gateway(stack: Stack) -> AsyncIterator[Gateway]:
    """Another gateway on the stack's store and Temporal, with settings of its own; every key
    a test stored is deleted afterwards (any stored key, even revoked, closes the stack's open
    gateway to the tests that follow)."""

    @asynccontextmanager
    async def opened(key: str | None = None, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
        configured = stack.settings.model_copy(update=settings)
        app = create_app(services=dataclasses.replace(stack.services, settings=configured))
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=stack.url, headers=headers, timeout=30
        ) as client:
            yield client

    try:
        yield opened
    finally:
        await delete_stored_keys(stack)


@pytest.fixture
def fresh_cli_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `perdure` command, run in process (its own `main`: a subprocess each would cost
    seconds of imports), on a SQLite store of its own."""
    monkeypatch.setenv("PERDURE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("PERDURE_DATABASE_URL", raising=False)


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


@pytest.fixture
async def tenants(stack: Stack) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Clients of tenants alpha and beta (API keys configured), on the same stack."""
    settings = stack.settings.model_copy(
        update={"api_keys": ApiKeys.parse("key-a:alpha,key-b:beta")}
    )
    app = create_app(services=dataclasses.replace(stack.services, settings=settings))
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(
            transport=transport,
            base_url=stack.url,
            timeout=30,
            headers={"Authorization": "Bearer key-a"},
        ) as alpha,
        httpx.AsyncClient(
            transport=transport,
            base_url=stack.url,
            timeout=30,
            headers={"Authorization": "Bearer key-b"},
        ) as beta,
    ):
        yield alpha, beta


async def _opened(url: str) -> AsyncIterator[Database]:
    database = Database(url)
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, store_templates: MigratedTemplates
) -> AsyncIterator[Database]:
    """A migrated, empty store of its own (no Temporal, no gateway)."""
    with migrated_database_url(store_templates, request.param, tmp_path) as url:
        async for database in _opened(url):
            yield database


@pytest.fixture
async def sqlite_store(
    tmp_path: Path, store_templates: MigratedTemplates
) -> AsyncIterator[Database]:
    """As `store`, SQLite only: for what only SQLite has (its write lock, its store thread)."""
    with migrated_database_url(store_templates, "sqlite", tmp_path) as url:
        async for database in _opened(url):
            yield database


@pytest.fixture(scope="session")
def record_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the MCP specs' calc server records its calls: read from the worker's environment
    when it starts the server, the first time a spec of this session uses it."""
    path = tmp_path_factory.mktemp("mcp") / "calc-records.txt"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PERDURE_TEST_MCP_RECORD_FILE", str(path))
        yield path
