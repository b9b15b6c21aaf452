"""`PERDURE_LOG_FORMAT=json`: one JSON object a line, with the ids bound where it was logged."""

import asyncio
import json
import logging
import sys

import pytest

from perdure.runtime.settings import Settings
from perdure.telemetry.json_logs import MASK, JsonFormatter, use_json_logs
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


def test_the_masked_secrets_are_every_secret_the_settings_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_API_KEY", "temporal-cloud-789")  # read as Temporal's SDKs do
    settings = Settings.model_validate(
        {
            "OPENAI_API_KEY": "sk-openai-123",
            "ANTHROPIC_API_KEY": "sk-ant-456",
            "PERDURE_METRICS_TOKEN": "scrape-456",
            "PERDURE_API_KEYS": "key-alpha-1:alpha, key-beta-2:beta",
            "PERDURE_DATABASE_URL": "postgresql+asyncpg://perdure:pg-pass-0001@db/perdure",
        }
    )

    assert set(settings.log_secrets()) == {
        "sk-openai-123",
        "sk-ant-456",
        "scrape-456",
        "key-alpha-1",
        "key-beta-2",
        "pg-pass-0001",
        "temporal-cloud-789",
    }


def test_a_json_log_line_never_shows_a_secret_of_the_settings() -> None:
    settings = Settings.model_validate(
        {"PERDURE_API_KEYS": "key-alpha-0001:alpha", "ANTHROPIC_API_KEY": "sk-ant-0123456789"}
    )
    formatter = JsonFormatter(settings.log_secrets())

    line = formatter.format(record("sent %s with %s", "key-alpha-0001", "sk-ant-0123456789"))

    assert "key-alpha-0001" not in line
    assert "sk-ant-0123456789" not in line
    assert json.loads(line)["message"] == f"sent {MASK} with {MASK}"


def test_json_mode_replaces_the_root_handlers_with_the_json_formatter() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        use_json_logs(secrets=())
        assert len(root.handlers) == 1
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)
