from collections.abc import AsyncIterator

import httpx
import pytest

from tests.stack import Stack


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:
        yield client
