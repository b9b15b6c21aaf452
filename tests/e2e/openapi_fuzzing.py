"""The OpenAPI fuzzing of `test_openapi_fuzz.py`: schemathesis and hypothesis, imported only by
the process that runs it (each costs seconds of CPU to import)."""

import collections
import dataclasses
import traceback

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance

EXAMPLES_PER_OPERATION = 16
"""Per operation and generation mode."""
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


PLACEHOLDER_SESSIONS = ("fuzz-session-finished", "fuzz-session-running")
"""Stand for each store's own sessions in the generated cases (`Target.sessions`)."""


@dataclasses.dataclass
class Target:
    """A running gateway to fuzz, and its sessions: one finished, one whose turn still runs."""

    url: str
    sessions: tuple[str, str]

    def aimed(self, case: Case) -> Case:
        """The case, aimed at this gateway's sessions where it names a placeholder."""
        session = case.path_parameters.get("session_id")
        if session not in PLACEHOLDER_SESSIONS:
            return case
        aimed = case.derive(keep_auth=True)
        aimed.path_parameters["session_id"] = self.sessions[PLACEHOLDER_SESSIONS.index(session)]
        return aimed


def _strategies(operation: APIOperation, mode: GenerationMode) -> st.SearchStrategy[Case]:
    fuzzed = operation.as_strategy(generation_mode=mode)
    strategies = [fuzzed]
    if "{session_id}" in operation.path:  # also aim at sessions that exist
        strategies += [
            operation.as_strategy(generation_mode=mode, path_parameters={"session_id": session})
            for session in PLACEHOLDER_SESSIONS
        ]
    if operation.label == "POST /api/chat" and mode is GenerationMode.POSITIVE:
        strategies.append(fuzzed.map(_submits_a_user_message))
    return st.one_of(strategies)


def generated(operation: APIOperation, mode: GenerationMode) -> list[Case]:
    """The operation's cases in this mode: the same on every run (derandomized), generated once
    for every gateway they are sent to."""
    cases: list[Case] = []

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_strategies(operation, mode))
    def collect(case: Case) -> None:
        cases.append(case)

    collect()
    return cases


def _sent(case: Case, target: Target) -> int:
    """Sends the case; its response's status, once every check passed."""
    response = target.aimed(case).call_and_validate(
        base_url=target.url,
        checks=[not_a_server_error, response_schema_conformance],
        timeout=REQUEST_TIMEOUT_SECONDS,
    )
    return response.status_code


def fuzz(targets: list[Target]) -> tuple[list[str], dict[str, collections.Counter[int]]]:
    """Every failure, described (none when all passed), and the statuses seen per operation."""
    schema = schemathesis.openapi.from_url(f"{targets[0].url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")  # deletes last
    failures: list[str] = []
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                cases = generated(operation, mode)
            except Unsatisfiable:
                if mode is GenerationMode.POSITIVE:
                    raise
                continue  # nothing can be made invalid: the operation takes no input (GET /healthz)
            for target, case in ((target, case) for target in targets for case in cases):
                try:
                    statuses[operation.label][_sent(case, target)] += 1
                except Exception as error:  # noqa: BLE001 - collected and reported together
                    failures.append(
                        f"{operation.label} ({mode.value}) at {target.url}:\n"
                        + "".join(traceback.format_exception_only(error))
                        + target.aimed(case).as_curl_command(base_url=target.url)
                    )
    return failures, statuses
