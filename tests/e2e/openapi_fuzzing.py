"""The OpenAPI fuzzing of `test_openapi_fuzz.py`: schemathesis and hypothesis, imported only by
the process that runs it (each costs seconds of CPU to import)."""

import collections
import traceback

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance

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
