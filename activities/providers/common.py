"""Small helpers the provider adapters share."""

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, Literal

from activities.providers.errors import to_provider_error
from perdure.domain.provider_events import ProviderEvent

FinishReason = Literal["stop", "length", "content-filter", "tool-calls", "error", "other"]


def parse_arguments(text: str) -> dict[str, Any]:
    """Tool-call arguments as a JSON object; anything else (invalid, not an object) gives {}."""
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def dump_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


async def translate_errors(
    label: str, events: AsyncGenerator[ProviderEvent, None]
) -> AsyncGenerator[ProviderEvent, None]:
    """Pass `events` through, turning SDK and transport failures into `ProviderError`s."""
    async with aclosing(events) as source:
        try:
            async for event in source:
                yield event
        except Exception as exc:
            error = to_provider_error(label, exc)
            if error is None or error is exc:
                raise
            raise error from exc
