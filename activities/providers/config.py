"""The provider keys and settings the adapters use: handed to them, never read from the
environment here.

The process reads them once, in `perdure.runtime.settings.Settings` (`OPENAI_API_KEY`,
`OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `PERDURE_OPENAI_CONTINUATION`),
and the worker hands `Settings.provider_config()` to `provider_for`. The keys are `SecretStr`:
a `repr`, a log line or an error message shows `**********`, never a key.
"""

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr

from activities.providers.continuation_modes import CHAT_CONTINUATIONS, ChatContinuation
from perdure.domain.model_rules import Family, parse_families

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
"""The providers' own endpoints, where no base URL is configured (the relay's upstreams too)."""

CONTINUATION_VARIABLE = "PERDURE_OPENAI_CONTINUATION"


def chat_continuation(value: object) -> ChatContinuation:
    """`value` as a known Chat Completions continuation (case and surrounding blanks ignored;
    None or blank: the default, `instruction`); ValueError naming `PERDURE_OPENAI_CONTINUATION`,
    the value and the accepted values if it is anything else."""
    normalized = ("" if value is None else str(value)).strip().lower() or "instruction"
    for accepted in CHAT_CONTINUATIONS:
        if normalized == accepted:
            return accepted
    raise ValueError(
        f"{CONTINUATION_VARIABLE}={normalized!r} is not a continuation Perdure knows; "
        f"expected one of: {', '.join(CHAT_CONTINUATIONS)} (default: instruction)."
    )


def blank_is_unset(value: object) -> object:
    """Surrounding blanks dropped, and an empty or blank value is no value (None)."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, str):
        return value.strip() or None
    return value


OptionalKey = Annotated[SecretStr | None, BeforeValidator(blank_is_unset)]
OptionalUrl = Annotated[str | None, BeforeValidator(blank_is_unset)]
Continuation = Annotated[ChatContinuation, BeforeValidator(chat_continuation)]


def model_families(value: object) -> object:
    """`PERDURE_MODEL_FAMILIES` (`model-id=family,…`) as a mapping; blank: none."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            return parse_families(value)
        except ValueError as error:
            raise ValueError(f"PERDURE_MODEL_FAMILIES: {error}") from None
    return value


ModelFamilies = Annotated[dict[str, Family], BeforeValidator(model_families)]
"""The field types of the provider settings, shared with `Settings`, which reads them."""


class ProviderConfig(BaseModel):
    """What the `openai:`, `openai-responses:` and `anthropic:` adapters are configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    openai_api_key: OptionalKey = None
    """`OPENAI_API_KEY`. None: an OpenAI model fails with a non-retryable `ProviderError`."""
    openai_base_url: OptionalUrl = None
    """`OPENAI_BASE_URL`, for OpenAI-compatible servers. None: the OpenAI API."""
    anthropic_api_key: OptionalKey = None
    """`ANTHROPIC_API_KEY`. None: an Anthropic model fails with a non-retryable `ProviderError`."""
    anthropic_base_url: OptionalUrl = None
    """`ANTHROPIC_BASE_URL`. None: the Anthropic API."""
    openai_continuation: Continuation = "instruction"
    """`PERDURE_OPENAI_CONTINUATION`: how `openai:` models continue a partial answer."""
    relay_url: OptionalUrl = None
    """`PERDURE_RELAY_URL`: the provider relay the Chat Completions and Anthropic adapters
    stream through (docs/relay.md); None: straight to the provider."""
    relay_secret: OptionalKey = None
    """`PERDURE_RELAY_SECRET`: the relay's shared secret."""
    model_families: ModelFamilies = Field(default_factory=dict)
    """`PERDURE_MODEL_FAMILIES`: the rules (`perdure/domain/model_rules.py`) of model ids
    that are not recognised by name."""
