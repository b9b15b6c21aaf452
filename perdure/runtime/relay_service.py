"""The provider relay as a service of this process: its configuration from the settings, and
its server (`perdure relay`, or in-process in `perdure dev`)."""

import secrets

import uvicorn
from pydantic import SecretStr

from activities.providers.config import ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL
from perdure.relay.app import Relay, RelayConfig, relay_app
from perdure.relay.held import RelayLimits
from perdure.runtime.settings import Settings


class RelayNotConfigured(ValueError):
    pass


def relay_config(settings: Settings, secret: SecretStr | None = None) -> RelayConfig:
    """The relay's configuration: the provider keys and base URLs of these settings."""
    secret = secret or settings.relay_secret
    if secret is None:
        raise RelayNotConfigured(
            "PERDURE_RELAY_SECRET is not set: the relay forwards only for callers that "
            "present it (set the same value on the workers)"
        )
    keys = {
        provider: key
        for provider, key in (
            ("openai", settings.openai_api_key),
            ("anthropic", settings.anthropic_api_key),
        )
        if key is not None
    }
    return RelayConfig(
        secret=secret,
        upstreams={
            "openai": settings.openai_base_url or OPENAI_DEFAULT_BASE_URL,
            "anthropic": settings.anthropic_base_url or ANTHROPIC_DEFAULT_BASE_URL,
        },
        keys=keys,
        limits=RelayLimits(
            max_total_bytes=settings.relay_max_bytes,
            max_stream_bytes=min(RelayLimits().max_stream_bytes, settings.relay_max_bytes),
            stream_seconds=settings.relay_stream_seconds,
        ),
    )


def relay_server(config: RelayConfig, *, host: str, port: int) -> uvicorn.Server:
    return uvicorn.Server(
        uvicorn.Config(
            relay_app(Relay(config)),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            log_config=None,
        )
    )


def dev_relay_secret() -> SecretStr:
    """A secret for a relay and a worker of one process, which share it and nothing else."""
    return SecretStr(secrets.token_urlsafe(32))
