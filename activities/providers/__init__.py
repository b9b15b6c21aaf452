"""Model providers behind one streaming interface."""

from activities.providers.base import ModelRequest, Provider, ProviderError, ResumeToken
from activities.providers.continuation_modes import CONTINUE_INSTRUCTION, Continuation
from activities.providers.registry import provider_for

__all__ = [
    "CONTINUE_INSTRUCTION",
    "Continuation",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ResumeToken",
    "provider_for",
]
