"""Stream one provider request into the log, aborting when the provider stalls."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio.exceptions import ApplicationError

from activities.providers import ModelRequest, Provider
from activities.providers.deadlines import WaitDeadline
from perdure.domain.names import PROVIDER_STALLED
from perdure.domain.provider_events import ResponseCursor, Unresumable
from perdure.domain.step_chunks import StepChunker
from perdure.domain.ui import Chunk
from storage.log_appender import BufferedLog


@dataclass
class StreamTarget:
    writer: BufferedLog
    chunker: StepChunker
    log_step: int
    """Index of the step in the log, stored with a resumable provider's cursor."""
    last_cursor: dict[str, Any] | None = field(default=None)
    """Where the provider's server-side response stands (to cancel it on a stop)."""


class ProviderStalled(ApplicationError):
    def __init__(self, label: str, seconds: float) -> None:
        super().__init__(
            f"{label} stalled: no chunk for {seconds:g} s; the stream was aborted",
            type=PROVIDER_STALLED,
        )


async def stream_into_log(
    provider: Provider, request: ModelRequest, target: StreamTarget, *, stall_timeout: float
) -> None:
    """Chunks of a resumable provider are held until the cursor that covers them arrives, so the
    stored cursor never points before what the log holds (no duplicate on re-attach)."""
    stream = provider.stream(request)
    held: list[Chunk] = []
    resumable = provider.supports_resume
    loop = asyncio.get_running_loop()
    try:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation (a user's
        # stop) that races with the next event arriving. One timeout for the whole stream,
        # expired by a `WaitDeadline` when a wait for an event lasts too long: a timer per
        # stall period, not one per event.
        async with asyncio.timeout(None) as stall:
            deadline = WaitDeadline(stall_timeout, lambda: stall.reschedule(loop.time()))
            try:
                while True:
                    deadline.begin()
                    try:
                        event = await anext(stream)
                    except StopAsyncIteration:
                        break
                    deadline.end()
                    chunks = target.chunker.feed(event)
                    if isinstance(event, ResponseCursor):
                        cursor = {
                            "step": target.log_step,
                            "response_id": event.response_id,
                            "sequence_number": event.sequence_number,
                        }
                        target.writer.add(held + chunks, cursor=cursor)
                        target.last_cursor = cursor
                        held = []
                    elif isinstance(event, Unresumable):
                        resumable = False  # no cursor will come: hold nothing back
                        target.writer.add(held + chunks)
                        held = []
                    elif resumable:
                        held.extend(chunks)
                    else:
                        target.writer.add(chunks)
                target.writer.add(held)
            finally:
                deadline.close()
    except TimeoutError:
        if stall.expired():
            raise ProviderStalled(provider.label, stall_timeout) from None
        raise
    finally:
        await stream.aclose()
