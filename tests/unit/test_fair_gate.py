"""The intake's gate (perdure/turn_control/fair_gate.py): at most `width` holders, waiters let
in round-robin across tenants, each tenant's in arrival order; a waiter that gives up takes
no turn."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from perdure.turn_control.fair_gate import FairGate, IntakeBusy
from perdure.turn_control.fairness_keys import MAX_FAIRNESS_KEY_BYTES, fairness_key


async def admitted_order(gate: FairGate, arrivals: list[tuple[str, str]]) -> list[str]:
    """The names of `arrivals` (key, name) in the order the gate lets them in, while a first
    holder keeps the only place until all have arrived."""
    order: list[str] = []
    release = asyncio.Event()

    async def first() -> None:
        async with gate.turn("first"):
            await release.wait()

    async def arrive(key: str, name: str) -> None:
        async with gate.turn(key):
            order.append(name)
            await asyncio.sleep(0)

    holder = asyncio.create_task(first())
    await asyncio.sleep(0)
    waiters = []
    for key, name in arrivals:
        waiters.append(asyncio.create_task(arrive(key, name)))
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(holder, *waiters)
    return order


async def test_a_burst_of_one_tenant_does_not_keep_another_behind_all_of_it() -> None:
    arrivals = [("a", f"a{n}") for n in range(5)] + [("b", "b0"), ("b", "b1")]

    order = await admitted_order(FairGate(1), arrivals)

    assert order == ["a0", "b0", "a1", "b1", "a2", "a3", "a4"]


async def test_no_more_than_width_hold_the_gate_at_once() -> None:
    gate, inside, most = FairGate(3), 0, 0

    async def hold() -> None:
        nonlocal inside, most
        async with gate.turn("a"):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(hold() for _ in range(10)))

    assert most == 3
    assert gate.waiting == 0


@contextlib.asynccontextmanager
async def held(gate: FairGate) -> AsyncIterator[None]:
    """The gate's one place taken by tenant `a` for the block, then given back."""
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.turn("a"):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    try:
        yield
    finally:
        release.set()
        await holder


async def test_a_waiter_cancelled_before_its_turn_takes_none() -> None:
    gate = FairGate(1)

    async def wait() -> None:
        async with gate.turn("a"):
            pytest.fail("let in after being cancelled")

    async with held(gate):
        gone = asyncio.create_task(wait())
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone

    async with asyncio.timeout(1):
        async with gate.turn("b"):
            assert gate.waiting == 0


async def test_a_waiter_cancelled_as_it_is_let_in_passes_its_turn_on() -> None:
    gate = FairGate(1)
    order: list[str] = []

    async def enter(name: str) -> None:
        async with gate.turn(name):
            order.append(name)

    async with gate.turn("first"):
        let_in = asyncio.create_task(enter("a"))
        after = asyncio.create_task(enter("b"))
        await asyncio.sleep(0)
    let_in.cancel()  # let in as the first holder left, cancelled before it ran
    await asyncio.gather(let_in, after, return_exceptions=True)

    assert order == ["b"]
    async with asyncio.timeout(1):
        async with gate.turn("c"):
            pass


def test_a_tenant_id_over_temporals_64_bytes_gets_a_short_key_of_its_own() -> None:
    long_one, long_two = "t" * 199 + "1", "t" * 199 + "2"

    keys = {fairness_key(long_one), fairness_key(long_two)}

    assert len(keys) == 2
    assert all(len(key.encode()) <= MAX_FAIRNESS_KEY_BYTES for key in keys)
    assert fairness_key("acme") == "acme"


async def test_a_waiter_past_its_patience_is_refused_as_busy_and_takes_no_turn() -> None:
    gate = FairGate(1)

    async with held(gate):
        with pytest.raises(IntakeBusy, match="waited 0.05 s for a turn"):
            async with gate.turn("b", patience=0.05):
                pytest.fail("let in past its patience")
        assert gate.waiting == 0

    async with asyncio.timeout(1):
        async with gate.turn("c", patience=0.05):
            pass
