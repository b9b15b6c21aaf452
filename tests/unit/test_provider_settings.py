"""Provider keys and settings come from the process's `Settings`, never from `os.environ` in the
provider code: the SDK clients are built with what the settings hold, and so is the default
model."""

import pytest
from pydantic import SecretStr

from activities.providers.base import ModelRequest, ProviderError
from activities.providers.clients import anthropic_client, openai_client
from activities.providers.config import ProviderConfig
from activities.providers.openai_chat import OpenAIChatProvider
from perdure.domain.conversation import UserItem
from perdure.runtime.settings import Settings
from perdure.testing.fakeprovider.server import FakeProvider
from tests.fakeprovider_fixtures import collect, count_to, tag, text_of

PROVIDER_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "PERDURE_OPENAI_CONTINUATION",
    "PERDURE_MODEL",
)


@pytest.fixture
def no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_provider_environment")
async def test_a_key_given_only_through_the_settings_is_what_the_sdk_clients_use(
    fake_provider: FakeProvider,
) -> None:
    settings = Settings.model_validate(
        {
            "OPENAI_API_KEY": "sk-settings-only",
            "OPENAI_BASE_URL": fake_provider.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-settings-only",
            "ANTHROPIC_BASE_URL": fake_provider.anthropic_base_url,
        }
    )
    config = settings.provider_config()

    openai = openai_client(config)
    assert openai.api_key == "sk-settings-only"
    assert str(openai.base_url).rstrip("/") == fake_provider.openai_base_url
    assert openai.max_retries == 0
    anthropic = anthropic_client(config)
    assert anthropic.api_key == "sk-ant-settings-only"
    assert str(anthropic.base_url).rstrip("/") == fake_provider.anthropic_base_url
    assert anthropic.max_retries == 0
    # And a model answers through them.
    text = f"@count 3 {tag()}"
    request = ModelRequest(model="fake-model", conversation=[UserItem(text=text)])
    events = await collect(OpenAIChatProvider("fake-model", config=config), request)
    assert text_of(events) == count_to(3)


async def test_the_clients_never_fall_back_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere.invalid/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://elsewhere.invalid")

    configured = ProviderConfig(openai_api_key="sk-configured", anthropic_api_key="sk-ant-c")
    assert openai_client(configured).api_key == "sk-configured"
    assert str(openai_client(configured).base_url).rstrip("/") == "https://api.openai.com/v1"
    assert anthropic_client(configured).api_key == "sk-ant-c"
    assert str(anthropic_client(configured).base_url).rstrip("/") == "https://api.anthropic.com"
    with pytest.raises(ProviderError, match="OPENAI_API_KEY is not set") as caught:
        openai_client(ProviderConfig())
    assert not caught.value.retryable
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY is not set") as caught:
        anthropic_client(ProviderConfig())
    assert not caught.value.retryable


async def test_clients_are_shared_per_key_and_base_url() -> None:
    config = ProviderConfig(openai_api_key="sk-a", openai_base_url="http://one.invalid/v1")
    same = ProviderConfig(openai_api_key=SecretStr("sk-a"), openai_base_url="http://one.invalid/v1")
    assert openai_client(config) is openai_client(same)
    assert openai_client(config) is not openai_client(
        config.model_copy(update={"openai_api_key": SecretStr("sk-b")})
    )
    assert openai_client(config) is not openai_client(ProviderConfig(openai_api_key="sk-a"))


@pytest.mark.usefixtures("no_provider_environment")
@pytest.mark.parametrize(
    ("fields", "model"),
    [
        ({"OPENAI_API_KEY": "sk-o"}, "openai:gpt-4.1-mini"),
        ({"ANTHROPIC_API_KEY": "sk-a"}, "anthropic:claude-sonnet-4-6"),
        ({"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"}, "openai:gpt-4.1-mini"),
        ({"OPENAI_API_KEY": "  ", "ANTHROPIC_API_KEY": "sk-a"}, "anthropic:claude-sonnet-4-6"),
        ({}, "demo"),
        ({"OPENAI_API_KEY": "sk-o", "PERDURE_MODEL": "demo"}, "demo"),
    ],
)
def test_the_default_model_follows_the_provider_keys_in_the_settings(
    fields: dict[str, str], model: str
) -> None:
    assert Settings.model_validate(fields).model == model


def test_the_default_model_follows_the_keys_the_environment_gives_the_settings(
    no_provider_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    settings = Settings()
    assert settings.model == "anthropic:claude-sonnet-4-6"
    assert settings.provider_config().anthropic_api_key == SecretStr("sk-ant-env")


@pytest.mark.usefixtures("no_provider_environment")
def test_keys_never_print() -> None:
    settings = Settings.model_validate(
        {"OPENAI_API_KEY": "sk-secret-openai", "ANTHROPIC_API_KEY": "sk-secret-anthropic"}
    )
    config = settings.provider_config()
    for shown in (repr(settings), str(settings), repr(config), config.model_dump_json()):
        assert "sk-secret" not in shown


@pytest.mark.usefixtures("no_provider_environment")
@pytest.mark.parametrize(("value", "continuation"), [(" VLLM ", "vllm"), ("   ", "instruction")])
def test_the_openai_continuation_is_read_with_the_settings(value: str, continuation: str) -> None:
    settings = Settings.model_validate({"PERDURE_OPENAI_CONTINUATION": value})
    assert settings.provider_config().openai_continuation == continuation


@pytest.mark.usefixtures("no_provider_environment")
def test_an_unknown_openai_continuation_stops_the_settings_and_the_config() -> None:
    refused = r"PERDURE_OPENAI_CONTINUATION='prefill'.*instruction, vllm, deepseek"
    with pytest.raises(ValueError, match=refused):
        Settings.model_validate({"PERDURE_OPENAI_CONTINUATION": "Prefill"})
    with pytest.raises(ValueError, match=refused):
        ProviderConfig(openai_continuation="prefill")
