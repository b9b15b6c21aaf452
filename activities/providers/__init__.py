"""Model providers behind one streaming interface.

`provider_for` and `import_adapters` (and with them every adapter and both provider SDKs) are
imported on first use:
the gateway and the CLI import `ProviderConfig` through the settings and never stream a model.
"""

from typing import TYPE_CHECKING, Any

from activities.providers.base import ModelRequest, Provider, ProviderError, ResumeToken
from activities.providers.config import ProviderConfig
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, Continuation

if TYPE_CHECKING:
    from activities.providers.registry import import_adapters, provider_for

__all__ = [
    "CONTINUE_INSTRUCTION",
    "Continuation",
    "ModelRequest",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ResumeToken",
    "import_adapters",
    "provider_for",
]


def __getattr__(name: str) -> Any:
    if name in ("provider_for", "import_adapters"):
        from activities.providers import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
