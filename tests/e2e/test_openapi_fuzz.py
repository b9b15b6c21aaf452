"""Fuzz every operation of the gateway's OpenAPI document with schemathesis, over HTTP against
a running stack on each store: valid and invalid inputs alike never cause a server error, and
every response matches the document."""

import asyncio
import time
import uuid

import httpx
import pytest

from perdure.testing.chat_client import chat_body, read_stream, user_message
from perdure.testing.stack import Stack


async def existing_sessions(stack: Stack) -> tuple[str, str]:
    """A finished session and one whose turn is still running when the fuzzing starts."""
    finished, running = (f"fuzz-{uuid.uuid4().hex[:8]}" for _ in range(2))
    async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
        await read_stream(http, "POST", "/api/chat", json=chat_body(finished, user_message("hi")))
        await read_stream(
            http,
            "POST",
            "/api/chat",
            json=chat_body(running, user_message("@count 30 @delay 20")),
            stop_after=3,
        )
    return finished, running


# A fixed number of examples, generated once and sent to both stores: about a minute on a quiet
# machine, longer beside the rest of the suite. The bound is for a fuzzer that hangs.
@pytest.mark.long
@pytest.mark.timeout(300)
async def test_fuzzing_the_openapi_document_finds_no_server_error(
    sqlite_stack: Stack, postgres_stack: Stack
) -> None:
    from tests.e2e.openapi_fuzzing import Target, fuzz

    targets = [
        Target(stack.url, await existing_sessions(stack))
        for stack in (sqlite_stack, postgres_stack)
    ]
    started = time.monotonic()
    failures, statuses = await asyncio.to_thread(fuzz, targets)

    print(f"fuzzed the OpenAPI document in {time.monotonic() - started:.1f} s")
    for label, seen in statuses.items():
        print(f"  {label}: {dict(sorted(seen.items()))}")
    assert not failures, "\n\n".join(failures)
    assert statuses["POST /api/chat"][200] > 0, "no fuzzed message reached a turn"
