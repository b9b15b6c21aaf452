import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from storage.db import Database
from storage.migrate import migrate
from tests.databases import database_url
from tests.stack import Stack


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    """A migrated, empty store of its own (no Temporal, no gateway)."""
    with database_url(request.param, tmp_path) as url:
        await asyncio.to_thread(migrate, url)
        database = Database(url)
        try:
            yield database
        finally:
            await database.close()
