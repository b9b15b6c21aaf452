"""`PERDURE_LOG_FORMAT=json`: one JSON object a line, with the ids of the work that logged.

Fields: `time` (UTC, ISO 8601), `level`, `logger`, `message`, then whichever of `request_id`,
`tenant_id`, `session_id`, `submission_id` are bound (telemetry/log_context.py), and `error`
(the exception's type, message and traceback) when a record carries one.

Perdure never logs message text, API keys or Authorization headers. As a second line of
defence the formatter masks, in every line, `Bearer …` credentials and the values of the
secrets this process was configured with (`Settings.log_secrets`: provider keys, API keys,
the metrics token, the store's password, the Temporal API key).
"""

import datetime
import json
import logging
import re
from collections.abc import Iterable

from perdure.telemetry.log_context import current_ids

MIN_SECRET_LENGTH = 8
"""Shorter values are not masked: they would mask ordinary words (a test key like `x`)."""
MASK = "[redacted]"
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s,;\"']+")


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module's docstring)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = sorted(
            {secret for secret in secrets if len(secret) >= MIN_SECRET_LENGTH},
            key=len,
            reverse=True,
        )

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": self._masked(record.getMessage()),
            **current_ids(),
        }
        if record.exc_info:
            entry["error"] = self._masked(self.formatException(record.exc_info))
        elif record.exc_text:
            entry["error"] = self._masked(record.exc_text)
        return json.dumps(entry, ensure_ascii=False, default=str)

    def _masked(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return _BEARER.sub(lambda match: f"{match.group(1)} {MASK}", text)


def use_json_logs(*, secrets: Iterable[str], level: int = logging.INFO) -> None:
    """Send every log record (the root logger's, and uvicorn's when it propagates) through
    `JsonFormatter` on standard error, masking `secrets`, replacing the root logger's handlers."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
