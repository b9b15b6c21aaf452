"""Model providers behind one streaming interface.

`provider_for` (and with it every adapter and both provider SDKs) is imported on first use:
the gateway and the CLI import `ProviderConfig` through the settings and never stream a model.
"""

from typing import TYPE_CHECKING, Any

from activities.providers.base import ModelRequest, Provider, ProviderError, ResumeToken
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, Continuation

if TYPE_CHECKING:
    from activities.providers.registry import provider_for

__all__ = [
    "CONTINUE_INSTRUCTION",
    "Continuation",
    "ModelRequest",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ResumeToken",
    "provider_for",
]


def __getattr__(name: str) -> Any:
    if name == "provider_for":
        from activities.providers.registry import provider_for

        return provider_for
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
