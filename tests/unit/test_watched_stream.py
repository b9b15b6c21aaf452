"""`stream_into_log`: a provider that goes silent for the stall timeout is a stall; one that
streams on with shorter gaps is not, however long its answer lasts."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest

from activities.providers import ModelRequest, Provider
from activities.watched_stream import ProviderStalled, StreamTarget, stream_into_log
from perdure.domain.provider_events import Finish, ProviderEvent, TextDelta
from perdure.domain.step_chunks import StepChunker
from perdure.domain.ui import Chunk
from storage.log_appender import BufferedLog
from tests.waiting import eventually

STALL = 1.0


class PacedProvider:
    """Deltas `gap` seconds apart, then either a finish or silence."""

    label = "fake:paced"
    supports_resume = False

    def __init__(self, deltas: int, gap: float, *, then_silent: bool = False) -> None:
        self._deltas = deltas
        self._gap = gap
        self._then_silent = then_silent

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        for n in range(self._deltas):
            yield TextDelta(text=f"{n} ")
            await asyncio.sleep(self._gap)
        if self._then_silent:
            await asyncio.sleep(60)
        yield Finish(reason="stop")


class Written:
    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def add(self, chunks: list[Chunk], cursor: dict[str, Any] | None = None) -> None:
        self.chunks.extend(chunks)


def target(written: Written) -> StreamTarget:
    return StreamTarget(writer=cast(BufferedLog, written), chunker=StepChunker(0), log_step=0)


async def streamed(provider: PacedProvider, written: Written) -> None:
    await stream_into_log(
        cast(Provider, provider),
        ModelRequest(model="paced", system="", conversation=[]),
        target(written),
        stall_timeout=STALL,
    )


def text_of(written: Written) -> str:
    return "".join(str(c.get("delta", "")) for c in written.chunks if c["type"] == "text-delta")


async def test_an_answer_longer_than_the_stall_timeout_with_shorter_gaps_is_not_a_stall() -> None:
    written = Written()
    await streamed(PacedProvider(deltas=40, gap=0.05), written)  # 2 s in all, gaps of 50 ms
    assert text_of(written) == "".join(f"{n} " for n in range(40))


async def test_a_provider_silent_for_the_stall_timeout_is_a_stall() -> None:
    written = Written()
    started = asyncio.get_running_loop().time()
    with pytest.raises(ProviderStalled, match="stalled: no chunk for 1 s"):
        await streamed(PacedProvider(deltas=5, gap=0.05, then_silent=True), written)
    assert asyncio.get_running_loop().time() - started < 10  # not the provider's 60 s
    assert text_of(written) == "0 1 2 3 4 "


async def test_a_cancelled_stream_is_cancelled_not_a_stall() -> None:
    written = Written()
    streaming = asyncio.ensure_future(
        streamed(PacedProvider(deltas=5, gap=0.05, then_silent=True), written)
    )
    # Cancelled in the provider's silence, before the stall timeout ends it.
    await eventually(lambda: text_of(written) == "0 1 2 3 4 ", what="the five deltas")
    streaming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await streaming
