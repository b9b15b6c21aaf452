"""Process settings from the environment. Imported by the worker, gateway and CLI only."""

import hashlib
import hmac
import os
import re
from pathlib import Path
from typing import Any

from pydantic import Field, GetCoreSchemaHandler, field_validator
from pydantic_core import core_schema
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.names import DEFAULT_TASK_QUEUE
from storage.urls import default_sqlite_url


def _default_model() -> str:
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    return "demo"


API_KEYS_FORMAT = "key:tenant,key2:tenant2"
_API_KEY = re.compile(r"^[\x21-\x7e]{1,500}$")
"""Printable ASCII without spaces: what fits in `Authorization: Bearer <key>`."""
_TENANT = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class ApiKeys:
    """`PERDURE_API_KEYS`, parsed and validated once: the SHA-256 of each key with its tenant.

    The keys themselves are not kept, so no log, `repr` or error message can show them, and a
    presented key is compared with every known one in constant time (equal-length digests,
    `hmac.compare_digest`, no early exit), so timing tells nothing about which key was close.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: list[tuple[bytes, str]]) -> None:
        self._entries = tuple(entries)

    @classmethod
    def parse(cls, text: str) -> "ApiKeys":
        """Raise `ValueError` naming the entry's position (never its text) when malformed."""
        items = text.split(",")
        total = len(items)
        entries: list[tuple[bytes, str]] = []
        first_seen: dict[bytes, int] = {}
        for position, item in enumerate(items, start=1):
            where = f"entry {position} of {total}"
            if not item.strip():
                raise ValueError(f"{where} is empty; expected {API_KEYS_FORMAT}")
            if item.count(":") != 1:
                raise ValueError(
                    f"{where} must be key:tenant with exactly one ':'; expected {API_KEYS_FORMAT}"
                )
            key, tenant = (part.strip() for part in item.split(":"))
            if not key:
                raise ValueError(f"{where} has an empty key")
            if not tenant:
                raise ValueError(f"{where} has an empty tenant")
            if not _API_KEY.match(key):
                raise ValueError(
                    f"{where}: a key must be 1-500 printable ASCII characters, no spaces"
                )
            if not _TENANT.match(tenant):
                raise ValueError(f"{where}: a tenant must be 1-200 of A-Z a-z 0-9 _ . -")
            digest = _key_digest(key)
            if digest in first_seen:
                raise ValueError(f"entries {first_seen[digest]} and {position} have the same key")
            first_seen[digest] = position
            entries.append((digest, tenant))
        return cls(entries)

    def tenant_for(self, presented: str) -> str | None:
        """The tenant of `presented`, or None. Compares with every key, whatever matches."""
        digest = _key_digest(presented)
        found: str | None = None
        for known, tenant in self._entries:
            if hmac.compare_digest(known, digest):
                found = tenant
        return found

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ApiKeys(<{len(self._entries)} keys>)"

    @classmethod
    def _validate(cls, value: object) -> "ApiKeys":
        if isinstance(value, ApiKeys):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        raise ValueError(f"expected {API_KEYS_FORMAT}")

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda _: "**********"),
        )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_ignore_empty=True, extra="ignore", hide_input_in_errors=True
    )

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
    api_keys: ApiKeys | None = Field(default=None, alias="PERDURE_API_KEYS")
    """`key:tenant,key2:tenant2`, validated at start. Unset: no authentication, every caller is
    tenant `default`."""
    max_message_bytes: int = Field(default=1_000_000, alias="PERDURE_MAX_MESSAGE_BYTES", gt=0)
    poll_interval: float = Field(default=0.02, alias="PERDURE_POLL_INTERVAL", gt=0)
    """Seconds between log reads when no wake-up bus reaches this gateway."""
    worker_shutdown_grace: float = Field(default=30.0, alias="PERDURE_WORKER_SHUTDOWN_GRACE", gt=0)
    """Seconds a stopping worker gives its running activities before handing them over."""
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
