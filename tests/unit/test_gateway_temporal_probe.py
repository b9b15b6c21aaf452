"""Slow Temporal calls from the gateway share one health probe, re-checked while they wait."""

import asyncio
from typing import cast

import pytest
from temporalio.client import Client

from gateway.errors import ApiError
from gateway.temporal import temporal_call
from tests.waiting import eventually


class _ServiceClient:
    def __init__(self, healthy: bool = True) -> None:
        self.healthy = healthy
        self.probes = 0
        self.passed = 0

    async def check_health(self, timeout: object = None) -> bool:
        self.probes += 1
        await asyncio.sleep(0.05)
        if not self.healthy:
            raise ConnectionRefusedError("connection refused")
        self.passed += 1
        return True


class _Client:
    def __init__(self, healthy: bool = True) -> None:
        self.service_client = _ServiceClient(healthy)


def _client(healthy: bool = True) -> tuple[Client, _ServiceClient]:
    fake = _Client(healthy)
    return cast(Client, fake), fake.service_client


async def _slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "started"


async def test_a_burst_of_slow_calls_sends_one_probe_not_one_each() -> None:
    client, service = _client()

    results = await asyncio.gather(
        *(temporal_call(_slow(0.5), within=5, client=client) for _ in range(100))
    )

    assert results == ["started"] * 100
    assert service.probes == 1


async def test_a_failed_probe_answers_every_waiting_call_with_a_503() -> None:
    client, service = _client(healthy=False)

    outcomes = await asyncio.gather(
        *(temporal_call(_slow(5), within=10, client=client) for _ in range(20)),
        return_exceptions=True,
    )

    assert all(isinstance(o, ApiError) and o.status == 503 for o in outcomes)
    assert service.probes == 1


async def test_a_server_that_dies_during_a_long_call_is_noticed_within_seconds() -> None:
    client, service = _client()
    call = asyncio.ensure_future(temporal_call(_slow(30), within=60, client=client))
    await eventually(lambda: service.passed, what="the first probe passed")
    service.healthy = False

    with pytest.raises(ApiError) as raised:
        async with asyncio.timeout(3):
            await call

    assert raised.value.status == 503
