"""Model providers behind one streaming interface."""

from activities.providers.base import ModelRequest, Provider, ProviderError, ResumeToken
from activities.providers.registry import provider_for

__all__ = ["ModelRequest", "Provider", "ProviderError", "ResumeToken", "provider_for"]
