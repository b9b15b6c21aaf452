"""`PERDURE_LOG_FORMAT=json`: one JSON object a line, with the ids bound where it was logged."""

import asyncio
import json
import logging
import sys

import pytest

from perdure.telemetry.json_logs import MASK, JsonFormatter, configured_secrets, use_json_logs
from perdure.telemetry.log_context import bound_ids, close_request, current_ids, open_request


def record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("perdure.test", logging.INFO, __file__, 1, message, args, exc_info)


def formatted(
    message: str, *args: object, secrets: tuple[str, ...] = (), exc: bool = False
) -> dict[str, object]:
    line = JsonFormatter(secrets).format(record(message, *args, exc=exc))
    assert "\n" not in line
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_a_line_has_time_level_logger_and_message() -> None:
    line = formatted("turn ended: %s", "completed")

    assert line["level"] == "INFO"
    assert line["logger"] == "perdure.test"
    assert line["message"] == "turn ended: completed"
    assert str(line["time"]).endswith("+00:00")


def test_a_line_carries_the_ids_bound_where_it_was_logged() -> None:
    scope = open_request("req-1")
    try:
        with bound_ids(tenant_id="acme", session_id="s-1", submission_id="sub-1"):
            line = formatted("hello")
    finally:
        close_request(scope)

    assert line["request_id"] == "req-1"
    assert line["tenant_id"] == "acme"
    assert line["session_id"] == "s-1"
    assert line["submission_id"] == "sub-1"


def test_ids_bound_by_one_task_are_not_seen_by_another() -> None:
    async def bound_then_read() -> dict[str, str]:
        with bound_ids(submission_id="mine"):
            await asyncio.sleep(0)
            return current_ids()

    async def other() -> dict[str, str]:
        await asyncio.sleep(0)
        return current_ids()

    async def both() -> list[dict[str, str]]:
        return list(await asyncio.gather(bound_then_read(), other()))

    mine, theirs = asyncio.run(both())
    assert mine == {"submission_id": "mine"}
    assert theirs == {}


def test_a_new_request_starts_with_no_ids_of_earlier_work() -> None:
    with bound_ids(tenant_id="left-over"):
        scope = open_request("req-2")
        try:
            assert current_ids() == {"request_id": "req-2"}
        finally:
            close_request(scope)
        assert current_ids() == {"tenant_id": "left-over"}


def test_an_exception_is_one_field_of_the_same_line() -> None:
    line = formatted("failed", exc=True)

    assert "ValueError: boom" in str(line["error"])


def test_bearer_credentials_are_masked() -> None:
    line = formatted("headers: %s", {"authorization": "Bearer sk-live-abcdef"})

    assert "sk-live-abcdef" not in str(line["message"])
    assert MASK in str(line["message"])


def test_configured_secrets_are_masked_wherever_they_appear() -> None:
    line = formatted("calling with key=%s", "sk-proj-0123456789", secrets=("sk-proj-0123456789",))

    assert line["message"] == f"calling with key={MASK}"


def test_the_configured_secrets_are_the_provider_keys_the_metrics_token_and_api_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-123")
    monkeypatch.setenv("PERDURE_METRICS_TOKEN", "scrape-456")
    monkeypatch.setenv("PERDURE_API_KEYS", "key-alpha-1:alpha, key-beta-2:beta")

    secrets = configured_secrets()

    assert {"sk-openai-123", "scrape-456", "key-alpha-1", "key-beta-2"} <= set(secrets)


def test_json_mode_replaces_the_root_handlers_with_the_json_formatter() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        use_json_logs()
        assert len(root.handlers) == 1
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)
