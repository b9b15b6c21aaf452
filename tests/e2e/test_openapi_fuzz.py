"""Fuzz every operation of the gateway's OpenAPI document with schemathesis, over HTTP against
a running stack: valid and invalid inputs alike never cause a server error, and every response
matches the document."""

import asyncio
import collections
import time
import traceback
import uuid

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance

from perdure.testing.chat_client import chat_body, read_stream, user_message
from perdure.testing.stack import Stack

EXAMPLES_PER_OPERATION = 16
"""Per operation and generation mode: a run takes 25-35 s per store (SQLite, PostgreSQL)."""
REQUEST_TIMEOUT_SECONDS = 30


def _submits_a_user_message(case: Case) -> Case:
    """Most fuzzed chat bodies are refused early (an assistant message last, no text part…);
    this variant keeps the fuzzed ids, agent, texts and extra fields but makes the last message
    a user message with a text part, so fuzzed content reaches the store and a real turn."""
    body = case.body
    if not isinstance(body, dict):
        return case
    messages = body.get("messages")
    message = messages[-1] if isinstance(messages, list) and messages else body.get("message")
    if not isinstance(message, dict):
        return case
    parts = message.get("parts")
    text = next(
        (p["text"] for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)),
        "fuzz",
    )
    message.update(role="user", parts=[{"type": "text", "text": text}])
    body["trigger"] = "submit-message"
    return case


def _strategies(
    operation: APIOperation, mode: GenerationMode, sessions: list[str]
) -> st.SearchStrategy[Case]:
    fuzzed = operation.as_strategy(generation_mode=mode)
    strategies = [fuzzed]
    if "{session_id}" in operation.path:  # also aim at sessions that exist
        strategies += [
            operation.as_strategy(generation_mode=mode, path_parameters={"session_id": session})
            for session in sessions
        ]
    if operation.label == "POST /api/chat" and mode is GenerationMode.POSITIVE:
        strategies.append(fuzzed.map(_submits_a_user_message))
    return st.one_of(strategies)


def _fuzz_operation(
    base_url: str,
    operation: APIOperation,
    mode: GenerationMode,
    sessions: list[str],
    statuses: collections.Counter[int],
) -> None:
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_strategies(operation, mode, sessions))
    def check(case: Case) -> None:
        response = case.call_and_validate(
            base_url=base_url,
            checks=[not_a_server_error, response_schema_conformance],
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
        statuses[response.status_code] += 1

    check()


def fuzz(
    base_url: str, sessions: list[str]
) -> tuple[list[str], dict[str, collections.Counter[int]]]:
    """Every failure, described (none when all passed), and the statuses seen per operation."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")  # deletes last
    failures: list[str] = []
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzz_operation(base_url, operation, mode, sessions, statuses[operation.label])
            except Unsatisfiable:
                if mode is GenerationMode.POSITIVE:
                    raise
                # nothing can be made invalid: the operation takes no input (GET /healthz)
            except Exception as error:  # noqa: BLE001 - collected and reported together
                failures.append(
                    f"{operation.label} ({mode.value}):\n"
                    + "".join(traceback.format_exception_only(error))
                )
    return failures, statuses


async def existing_sessions(stack: Stack) -> list[str]:
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
    return [finished, running]


# A fixed number of examples: 40 s on a quiet machine, longer beside the rest of the suite. The
# bound is for a fuzzer that hangs, not for a slow machine.
@pytest.mark.timeout(300)
async def test_fuzzing_the_openapi_document_finds_no_server_error(stack: Stack) -> None:
    sessions = await existing_sessions(stack)
    started = time.monotonic()

    failures, statuses = await asyncio.to_thread(fuzz, stack.url, sessions)

    print(f"fuzzed the OpenAPI document in {time.monotonic() - started:.1f} s")
    for label, seen in statuses.items():
        print(f"  {label}: {dict(sorted(seen.items()))}")
    assert not failures, "\n\n".join(failures)
    assert statuses["POST /api/chat"][200] > 0, "no fuzzed message reached a turn"
