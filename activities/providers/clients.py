"""Official SDK clients, configured from the SDKs' own environment variables and cached.

Retries are off (`max_retries=0`): Temporal's retry policy owns them. A client's connection
pool belongs to the event loop that used it, so the cache is kept per running loop.
"""

import asyncio
import os
from asyncio import AbstractEventLoop
from weakref import WeakKeyDictionary

import anthropic
import httpx2
import openai

from activities.providers.base import ProviderError

_TIMEOUT = httpx2.Timeout(600.0, connect=10.0, read=120.0)

_OpenAIClients = dict[tuple[str, str], openai.AsyncOpenAI]
_AnthropicClients = dict[tuple[str, str], anthropic.AsyncAnthropic]
_openai: WeakKeyDictionary[AbstractEventLoop, _OpenAIClients] = WeakKeyDictionary()
_anthropic: WeakKeyDictionary[AbstractEventLoop, _AnthropicClients] = WeakKeyDictionary()


def _required(variable: str, provider: str) -> str:
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ProviderError(
            f"{provider}: the environment variable {variable} is not set; "
            f"set it to use {provider} models, or use the offline `demo` model.",
            retryable=False,
        )
    return value


def openai_client() -> openai.AsyncOpenAI:
    """An `AsyncOpenAI` from OPENAI_API_KEY / OPENAI_BASE_URL; ProviderError without a key."""
    key = (_required("OPENAI_API_KEY", "openai"), os.environ.get("OPENAI_BASE_URL", ""))
    clients = _openai.setdefault(asyncio.get_running_loop(), {})
    if key not in clients:
        clients[key] = openai.AsyncOpenAI(max_retries=0, timeout=_TIMEOUT)
    return clients[key]


def anthropic_client() -> anthropic.AsyncAnthropic:
    """An `AsyncAnthropic` from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL; ProviderError if no key."""
    key = (_required("ANTHROPIC_API_KEY", "anthropic"), os.environ.get("ANTHROPIC_BASE_URL", ""))
    clients = _anthropic.setdefault(asyncio.get_running_loop(), {})
    if key not in clients:
        clients[key] = anthropic.AsyncAnthropic(max_retries=0, timeout=_TIMEOUT)
    return clients[key]
