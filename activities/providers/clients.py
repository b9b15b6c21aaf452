"""Official SDK clients, built from a `ProviderConfig` and cached.

The key and base URL are always passed explicitly (an unset base URL is the provider's own
endpoint), so the SDKs never fall back to their environment variables for them: the process's
`Settings` is the one place those are read. Retries are off (`max_retries=0`): Temporal's retry
policy owns them. A client's connection pool belongs to the event loop that used it, so the
cache is kept per running loop, keyed by (key, base URL). Its sockets are read through
asyncio's own streams (`activities/providers/network.py` says why), unless a proxy is set.
"""

import asyncio
from asyncio import AbstractEventLoop
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import httpx2
import openai
from pydantic import SecretStr

from activities.providers.base import ProviderError
from activities.providers.config import (
    ANTHROPIC_DEFAULT_BASE_URL,
    OPENAI_DEFAULT_BASE_URL,
    ProviderConfig,
)
from activities.providers.network import asyncio_transport

if TYPE_CHECKING:
    import anthropic

_TIMEOUT = httpx2.Timeout(600.0, connect=10.0, read=120.0)

_OpenAIClients = dict[tuple[SecretStr, str], openai.AsyncOpenAI]
_AnthropicClients = dict[tuple[SecretStr, str], "anthropic.AsyncAnthropic"]
_openai: WeakKeyDictionary[AbstractEventLoop, _OpenAIClients] = WeakKeyDictionary()
_anthropic: WeakKeyDictionary[AbstractEventLoop, _AnthropicClients] = WeakKeyDictionary()


def _required(key: SecretStr | None, variable: str, provider: str) -> SecretStr:
    if key is None or not key.get_secret_value():
        raise ProviderError(
            f"{provider}: the environment variable {variable} is not set; "
            f"set it to use {provider} models, or use the offline `demo` model.",
            retryable=False,
        )
    return key


def _relay(config: ProviderConfig, provider: str) -> tuple[SecretStr, str]:
    """The relay's secret (where the SDK puts its key) and its base URL for `provider`."""
    secret = _required(config.relay_secret, "PERDURE_RELAY_SECRET", "the provider relay")
    return secret, f"{(config.relay_url or '').rstrip('/')}/{provider}"


def openai_client(config: ProviderConfig, *, relayed: bool = False) -> openai.AsyncOpenAI:
    """An `AsyncOpenAI` with `config`'s OpenAI key and base URL, or pointed at the relay;
    ProviderError without a key."""
    if relayed:
        key, base_url = _relay(config, "openai")
    else:
        key = _required(config.openai_api_key, "OPENAI_API_KEY", "openai")
        base_url = config.openai_base_url or OPENAI_DEFAULT_BASE_URL
    clients = _openai.setdefault(asyncio.get_running_loop(), {})
    if (key, base_url) not in clients:
        transport = asyncio_transport()
        http = openai.DefaultAsyncHttpxClient(transport=transport) if transport else None
        clients[key, base_url] = openai.AsyncOpenAI(
            api_key=key.get_secret_value(),
            base_url=base_url,
            max_retries=0,
            timeout=_TIMEOUT,
            http_client=http,
        )
    return clients[key, base_url]


def anthropic_client(
    config: ProviderConfig, *, relayed: bool = False
) -> "anthropic.AsyncAnthropic":
    """An `AsyncAnthropic` with `config`'s Anthropic key and base URL, or pointed at the relay;
    ProviderError if no key. The SDK is imported here, by the first Anthropic model's step."""
    import anthropic

    if relayed:
        key, base_url = _relay(config, "anthropic")
    else:
        key = _required(config.anthropic_api_key, "ANTHROPIC_API_KEY", "anthropic")
        base_url = config.anthropic_base_url or ANTHROPIC_DEFAULT_BASE_URL
    clients = _anthropic.setdefault(asyncio.get_running_loop(), {})
    if (key, base_url) not in clients:
        transport = asyncio_transport()
        http = anthropic.DefaultAsyncHttpxClient(transport=transport) if transport else None
        clients[key, base_url] = anthropic.AsyncAnthropic(
            api_key=key.get_secret_value(),
            base_url=base_url,
            max_retries=0,
            timeout=_TIMEOUT,
            http_client=http,
        )
    return clients[key, base_url]
