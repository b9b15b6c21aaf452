"""The provider keys and settings the adapters use: handed to them, never read from the
environment here.

The process reads them once, in `perdure.runtime.settings.Settings` (`OPENAI_API_KEY`,
`OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `PERDURE_OPENAI_CONTINUATION`),
and the worker hands `Settings.provider_config()` to `provider_for`. The keys are `SecretStr`:
a `repr`, a log line or an error message shows `**********`, never a key.
"""

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from activities.providers.continuation_modes import CHAT_CONTINUATIONS, ChatContinuation

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


class ProviderConfig(BaseModel):
    """What the `openai:`, `openai-responses:` and `anthropic:` adapters are configured with."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    openai_api_key: SecretStr | None = None
    """`OPENAI_API_KEY`. None: an OpenAI model fails with a non-retryable `ProviderError`."""
    openai_base_url: str | None = None
    """`OPENAI_BASE_URL`, for OpenAI-compatible servers. None: the OpenAI API."""
    anthropic_api_key: SecretStr | None = None
    """`ANTHROPIC_API_KEY`. None: an Anthropic model fails with a non-retryable `ProviderError`."""
    anthropic_base_url: str | None = None
    """`ANTHROPIC_BASE_URL`. None: the Anthropic API."""
    openai_continuation: ChatContinuation = "instruction"
    """`PERDURE_OPENAI_CONTINUATION`: how `openai:` models continue a partial answer."""

    @field_validator(
        "openai_api_key",
        "openai_base_url",
        "anthropic_api_key",
        "anthropic_base_url",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return blank_is_unset(value)

    @field_validator("openai_continuation", mode="before")
    @classmethod
    def _known_continuation(cls, value: object) -> ChatContinuation:
        return chat_continuation(value)
