"""A provider relay in this process, on a free port, in front of the fake provider."""

import contextlib
from collections.abc import AsyncIterator

from pydantic import SecretStr

from perdure.relay.app import Relay, RelayConfig, relay_app
from perdure.relay.held import RelayLimits
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.stack import serving

RELAY_SECRET = SecretStr("relay-test-secret")


def relay_config_for(fake: FakeProvider, limits: RelayLimits | None = None) -> RelayConfig:
    """The relay's configuration in front of `fake` (its keys are the fake's `fake-key`)."""
    key = SecretStr("fake-key")
    return RelayConfig(
        secret=RELAY_SECRET,
        upstreams={"openai": fake.openai_base_url, "anthropic": fake.anthropic_base_url},
        keys={"openai": key, "anthropic": key},
        limits=limits or RelayLimits(),
        max_request_bytes=1_000_000,
    )


@contextlib.asynccontextmanager
async def running_relay(config: RelayConfig) -> AsyncIterator[tuple[str, Relay]]:
    """(its URL, the relay): served until the block ends."""
    relay = Relay(config)
    async with serving(relay_app(relay)) as url:
        yield url, relay
