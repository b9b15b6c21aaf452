"""The SSE relay: keep-alives while quiet, and an end when its submission is gone."""

import pytest

from gateway import sse
from perdure.testing.stack import Stack


async def relay_events(stack: Stack, submission_id: str, *, limit: int) -> list[bytes]:
    events: list[bytes] = []
    async for event in sse.relay(
        stack.services.db,
        stack.services.watcher,
        message_id=f"msg_{submission_id}",
        submission_id=submission_id,
        after=-1,
    ):
        events.append(event)
        if len(events) >= limit:
            break
    return events


async def test_a_relay_whose_submission_was_deleted_ends_with_an_error(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse, "KEEP_ALIVE_SECONDS", 0.1)

    events = await relay_events(stack, "never-existed", limit=5)

    assert events == [sse.GONE]
    assert b'"type":"error"' in events[0] and events[0].endswith(b"data: [DONE]\n\n")
