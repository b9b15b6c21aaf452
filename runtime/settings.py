"""Process settings from the environment. Imported by the worker, gateway and CLI only."""

import os
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.names import DEFAULT_TASK_QUEUE
from storage.urls import default_sqlite_url


def _default_model() -> str:
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    return "demo"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore")

    temporal_address: str = Field(default="localhost:7233", alias="TEMPORAL_ADDRESS")
    temporal_namespace: str = Field(default="default", alias="TEMPORAL_NAMESPACE")
    task_queue: str = Field(default=DEFAULT_TASK_QUEUE, alias="PERDURE_TASK_QUEUE")
    data_dir: Path = Field(default=Path(".perdure"), alias="PERDURE_DATA_DIR")
    database_url: str | None = Field(default=None, alias="PERDURE_DATABASE_URL")
    model: str = Field(default_factory=_default_model, alias="PERDURE_MODEL")
    agents: str | None = Field(default=None, alias="PERDURE_AGENTS")
    """Comma-separated module paths whose `Agent` subclasses are served."""
    default_agent: str = Field(default="default", alias="PERDURE_DEFAULT_AGENT")
    host: str = Field(default="127.0.0.1", alias="PERDURE_HOST")
    port: int = Field(default=8000, alias="PERDURE_PORT", ge=0, le=65535)
    api_keys: str | None = Field(default=None, alias="PERDURE_API_KEYS")
    """`key:tenant,key2:tenant2`. Unset: no authentication, every caller is tenant `default`."""
    max_message_bytes: int = Field(default=1_000_000, alias="PERDURE_MAX_MESSAGE_BYTES", gt=0)
    poll_interval: float = Field(default=0.02, alias="PERDURE_POLL_INTERVAL", gt=0)
    """Seconds between log reads when no wake-up bus reaches this gateway."""
    heartbeat_timeout: float = Field(default=5.0, alias="PERDURE_HEARTBEAT_TIMEOUT", gt=0)
    ui_port: int = Field(default=8233, alias="PERDURE_TEMPORAL_UI_PORT")
    temporal_dev_config: Path = Field(
        default=Path("temporal-dev.yml"), alias="PERDURE_TEMPORAL_DEV_CONFIG"
    )

    @field_validator("model")
    @classmethod
    def _known_model_form(cls, value: str) -> str:
        prefixes = ("openai:", "openai-responses:", "anthropic:")
        if value != "demo" and not value.startswith(prefixes):
            raise ValueError(
                "PERDURE_MODEL must be demo, openai:<model>, openai-responses:<model> "
                "or anthropic:<model>"
            )
        return value

    def resolved_database_url(self) -> str:
        return self.database_url or default_sqlite_url(self.data_dir)

    def tenants_by_key(self) -> dict[str, str]:
        if not self.api_keys:
            return {}
        pairs = (item.split(":", 1) for item in self.api_keys.split(",") if item.strip())
        return {key.strip(): tenant.strip() for key, tenant in pairs}
