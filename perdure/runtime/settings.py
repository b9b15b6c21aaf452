"""Process settings from the environment. Imported by the worker, gateway and CLI only."""

import contextlib
import hashlib
import hmac
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import Field, GetCoreSchemaHandler, SecretStr, field_validator, model_validator
from pydantic_core import core_schema
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url

from activities.providers.config import (
    Continuation,
    ModelFamilies,
    OptionalKey,
    OptionalUrl,
    ProviderConfig,
)
from perdure.domain.access import Rate, parse_origins
from perdure.domain.names import DEFAULT_TASK_QUEUE, turn_workflow_id
from perdure.domain.prices import PriceTable
from perdure.domain.workspace_rules import WorkspaceLimits
from perdure.runtime.price_file import load_prices
from perdure.runtime.temporal_connection import TemporalConnectionConfigError, connection_options
from perdure.turn_control.fair_gate import DEFAULT_INTAKE_CONCURRENCY
from storage.urls import default_sqlite_url
from storage.workspace_blobs import BlobDirectory, usable_directory


def _default_model(fields: dict[str, Any]) -> str:
    """`PERDURE_MODEL` when unset: from the provider keys among the already validated `fields`."""
    if fields.get("openai_api_key") is not None:
        return "openai:gpt-4.1-mini"
    if fields.get("anthropic_api_key") is not None:
        return "anthropic:claude-sonnet-4-6"
    return "demo"


API_KEYS_FORMAT = "key:tenant,key2:tenant2"
OTLP_PROTOCOLS = ("http/protobuf", "grpc")
"""The OTLP protocols the trace exporter speaks (OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL)."""
_API_KEY = re.compile(r"^[\x21-\x7e]{1,500}$")
"""Printable ASCII without spaces: what fits in `Authorization: Bearer <key>`."""
_TENANT = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class ApiKeys:
    """`PERDURE_API_KEYS`, parsed and validated once: the SHA-256 of each key with its tenant.

    A presented key is compared with digests only, with every known one in constant time
    (equal-length digests, `hmac.compare_digest`, no early exit), so timing tells nothing about
    which key was close. The keys themselves are kept for one purpose, the JSON log's mask
    (`masked`): no `repr`, serialization or error message shows them.
    """

    __slots__ = ("_entries", "_keys")

    def __init__(self, entries: list[tuple[bytes, str]], keys: tuple[str, ...] = ()) -> None:
        self._entries = tuple(entries)
        self._keys = keys

    @classmethod
    def parse(cls, text: str) -> "ApiKeys":
        """Raise `ValueError` naming the entry's position (never its text) when malformed."""
        items = text.split(",")
        total = len(items)
        entries: list[tuple[bytes, str]] = []
        keys: list[str] = []
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
            keys.append(key)
        return cls(entries, tuple(keys))

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

    def masked(self) -> tuple[str, ...]:
        """The keys, for the log formatter to mask wherever they appear."""
        return self._keys

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
    # Provider keys: before `model`, whose default depends on them
    openai_api_key: OptionalKey = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: OptionalUrl = Field(default=None, alias="OPENAI_BASE_URL")
    """For OpenAI-compatible servers (vLLM, Ollama, DeepSeek, …); unset: the OpenAI API."""
    anthropic_api_key: OptionalKey = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: OptionalUrl = Field(default=None, alias="ANTHROPIC_BASE_URL")
    model: str = Field(default_factory=_default_model, alias="PERDURE_MODEL")
    """Unset: `openai:gpt-4.1-mini` with an OpenAI key, else `anthropic:claude-sonnet-4-6` with
    an Anthropic key, else `demo`."""
    openai_continuation: Continuation = Field(
        default="instruction", alias="PERDURE_OPENAI_CONTINUATION"
    )
    """How `openai:` models continue a partial answer: `instruction`, `vllm` or `deepseek`
    (activities/providers/openai_chat.py)."""
    model_families: Annotated[ModelFamilies, NoDecode] = Field(
        default_factory=dict, alias="PERDURE_MODEL_FAMILIES"
    )
    """`model-id=family,…`: which rules a model id Perdure does not recognise follows
    (`claude-4.5`, `claude-4.6`, `claude-4.7`, `openai`); unrecognised ids get the current
    generation's (docs/providers.md)."""
    agents: str | None = Field(default=None, alias="PERDURE_AGENTS")
    """Comma-separated module paths whose `Agent` subclasses are served."""
    default_agent: str = Field(default="default", alias="PERDURE_DEFAULT_AGENT")
    host: str = Field(default="127.0.0.1", alias="PERDURE_HOST")
    port: int = Field(default=8000, alias="PERDURE_PORT", ge=0, le=65535)
    api_keys: ApiKeys | None = Field(default=None, alias="PERDURE_API_KEYS")
    """`key:tenant,key2:tenant2`, validated at start. With neither these nor an active key in the
    store (`perdure keys create`), there is no authentication: every caller is tenant `default`."""
    prices: Annotated[PriceTable | None, NoDecode] = Field(default=None, alias="PERDURE_PRICES")
    """A JSON file of prices per model (perdure/domain/prices.py): `GET /v1/usage` and each
    answer's usage then say what the tokens cost. Unset: tokens only."""
    workspace_max_file_bytes: int = Field(
        default=1_000_000, alias="PERDURE_WORKSPACE_MAX_FILE_BYTES", ge=1, le=100_000_000
    )
    """The largest file of a session's workspace (docs/workspace.md)."""
    workspace_max_bytes: int = Field(
        default=50_000_000, alias="PERDURE_WORKSPACE_MAX_BYTES", ge=1, le=10_000_000_000
    )
    """All the files of one session's workspace together."""
    workspace_max_files: int = Field(
        default=10_000, alias="PERDURE_WORKSPACE_MAX_FILES", ge=1, le=1_000_000
    )
    workspace_blob_dir: Path | None = Field(default=None, alias="PERDURE_WORKSPACE_BLOB_DIR")
    """Where workspace contents of `PERDURE_WORKSPACE_BLOB_MIN_BYTES` or more are kept, as
    files (storage/workspace_blobs.py); every gateway and worker must share it. Unset: every
    content stays in the store's rows."""
    workspace_blob_min_bytes: int = Field(
        default=262_144, alias="PERDURE_WORKSPACE_BLOB_MIN_BYTES", ge=1, le=100_000_000
    )
    intake_concurrency: int = Field(
        default=DEFAULT_INTAKE_CONCURRENCY, alias="PERDURE_INTAKE_CONCURRENCY", ge=1, le=1000
    )
    """Submissions a process records and starts at once, tenants taking turns beyond it
    (perdure/turn_control/fair_gate.py). Raise it against a distant Temporal (Cloud), where
    each start waits on the network rather than on a busy server."""
    # Access
    rate_limit: Annotated[Rate | None, NoDecode] = Field(default=None, alias="PERDURE_RATE_LIMIT")
    """Submissions each tenant may create, e.g. `60/minute`: a token bucket per tenant in the
    store, shared by every gateway. A tenant's own rate (`perdure tenants set`) overrides it.
    Unset: no limit."""
    cors_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), alias="PERDURE_CORS_ORIGINS"
    )
    """Browser origins allowed to call the API (`scheme://host[:port]`, comma-separated, or
    `*`). Unset: no CORS headers at all."""
    cors_credentials: bool = Field(default=False, alias="PERDURE_CORS_CREDENTIALS")
    """Let browsers send cookies and HTTP auth cross-origin (never with `*`). Bearer keys in
    `Authorization` need no credentials mode."""
    max_message_bytes: int = Field(default=1_000_000, alias="PERDURE_MAX_MESSAGE_BYTES", gt=0)
    poll_interval: float = Field(default=0.02, alias="PERDURE_POLL_INTERVAL", gt=0)
    """Seconds between log reads when no wake-up bus reaches this gateway."""
    log_flush_interval: float = Field(
        default=0.025, alias="PERDURE_LOG_FLUSH_INTERVAL", ge=0, le=1, allow_inf_nan=False
    )
    """Seconds between the starts of two chunk-log flushes while several turns stream: their
    deltas of that time join into one row and one SSE event (storage/log_appender.py). 0: every
    flush as soon as the previous one ends."""
    worker_shutdown_grace: float = Field(default=30.0, alias="PERDURE_WORKER_SHUTDOWN_GRACE", gt=0)
    """Seconds a stopping worker gives its running activities before handing them over."""
    chunk_retention_hours: float = Field(
        default=168.0, alias="PERDURE_CHUNK_RETENTION_HOURS", ge=0, allow_inf_nan=False
    )
    """Hours a closed answer's chunk log is kept for resumes before the reconciler deletes its
    chunks (the stored message stays); 0 keeps them forever."""
    ui_port: int = Field(default=8233, alias="PERDURE_TEMPORAL_UI_PORT")
    temporal_ui_url: str | None = Field(default=None, alias="PERDURE_TEMPORAL_UI_URL")
    """The Temporal UI that turn links point at; unset: the dev server's, on `ui_port`."""
    temporal_dev_config: Path = Field(
        default=Path("temporal-dev.yml"), alias="PERDURE_TEMPORAL_DEV_CONFIG"
    )
    # Telemetry
    log_format: str = Field(default="text", alias="PERDURE_LOG_FORMAT")
    """`text` (the default) or `json`: one JSON object a line, with the request, tenant,
    session and submission ids of the work that logged it (telemetry/json_logs.py)."""
    metrics_port: int | None = Field(default=None, alias="PERDURE_METRICS_PORT", ge=0, le=65535)
    """The worker's Prometheus endpoint (`/metrics` on `PERDURE_HOST`); unset: none; 0: a free
    port, logged. The gateway serves `/metrics` on its own port whatever this says."""
    metrics_token: SecretStr | None = Field(default=None, alias="PERDURE_METRICS_TOKEN")
    """Unset: `/metrics` is open (it holds aggregates only, no tenant or session ids). Set:
    scrapes must send `Authorization: Bearer <token>`."""
    # The provider relay (docs/relay.md)
    relay_url: OptionalUrl = Field(default=None, alias="PERDURE_RELAY_URL")
    """A worker streams its Chat Completions and Anthropic steps through the relay at this URL;
    unset: straight to the provider (`perdure dev` starts one in-process)."""
    relay_secret: OptionalKey = Field(default=None, alias="PERDURE_RELAY_SECRET")
    """The relay's shared secret: required to run `perdure relay` and to use one."""
    relay_host: str = Field(default="127.0.0.1", alias="PERDURE_RELAY_HOST")
    relay_port: int = Field(default=8300, alias="PERDURE_RELAY_PORT", ge=0, le=65535)
    relay_max_bytes: int = Field(default=256 * 2**20, alias="PERDURE_RELAY_MAX_BYTES", gt=0)
    """What `perdure relay` holds at most, all streams together; past it a new stream is
    refused (a 503 the worker answers by going straight to the provider), none is dropped."""
    relay_stream_seconds: float = Field(
        default=900.0, alias="PERDURE_RELAY_STREAM_SECONDS", gt=0, allow_inf_nan=False
    )
    """How long the relay reads one provider answer, at most."""
    head_start: bool = Field(default=True, alias="PERDURE_HEAD_START")
    """A gateway with a relay (`PERDURE_RELAY_URL`) sends each turn's first provider request at
    intake, for its first step to adopt (docs/relay.md, "Head start")."""
    dev_relay: bool = Field(default=True, alias="PERDURE_DEV_RELAY")
    """`perdure dev` runs a relay in-process (unless PERDURE_RELAY_URL names one)."""
    otlp_endpoint: str | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp_traces_endpoint: str | None = Field(
        default=None, alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    """Either one turns tracing on; the exporter reads the other standard
    `OTEL_EXPORTER_OTLP_*` variables (headers, timeout) itself."""
    otlp_protocol: str | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_PROTOCOL")
    otlp_traces_protocol: str | None = Field(
        default=None, alias="OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    )
    """`http/protobuf` (the default) or `grpc`; the traces one wins."""
    otel_sdk_disabled: bool = Field(default=False, alias="OTEL_SDK_DISABLED")
    """True turns tracing off even with an endpoint set."""

    def workspace_limits(self) -> WorkspaceLimits:
        return WorkspaceLimits(
            max_file_bytes=self.workspace_max_file_bytes,
            max_total_bytes=self.workspace_max_bytes,
            max_files=self.workspace_max_files,
        )

    def workspace_blobs(self) -> BlobDirectory | None:
        if self.workspace_blob_dir is None:
            return None
        return BlobDirectory(self.workspace_blob_dir, min_bytes=self.workspace_blob_min_bytes)

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _rate(cls, value: object) -> object:
        return Rate.parse(value) if isinstance(value, str) else value

    @field_validator("prices", mode="before")
    @classmethod
    def _price_file(cls, value: object) -> object:
        return load_prices(Path(value)) if isinstance(value, str | Path) else value

    @field_validator("workspace_blob_dir")
    @classmethod
    def _blob_dir(cls, value: Path | None) -> Path | None:
        return None if value is None else usable_directory(value)

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _exact_origins(cls, value: object) -> object:
        return parse_origins(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _no_wildcard_with_credentials(self) -> "Settings":
        if self.cors_credentials and "*" in self.cors_origins:
            raise ValueError(
                "PERDURE_CORS_ORIGINS=* with PERDURE_CORS_CREDENTIALS would let any site act "
                "with a visitor's credentials: list exact origins"
            )
        return self

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

    @field_validator("log_format")
    @classmethod
    def _known_log_format(cls, value: str) -> str:
        if value.strip().lower() not in ("text", "json"):
            raise ValueError("PERDURE_LOG_FORMAT must be text or json")
        return value.strip().lower()

    @field_validator("otlp_endpoint", "otlp_traces_endpoint")
    @classmethod
    def _http_endpoint(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                "an OTLP endpoint must be an http:// or https:// URL (for gRPC too: the "
                "scheme says whether the connection uses TLS)"
            )
        return value

    @field_validator("otlp_protocol", "otlp_traces_protocol")
    @classmethod
    def _built_in_protocol(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.strip() not in OTLP_PROTOCOLS:
            raise ValueError(
                "Perdure exports traces as OTLP over http/protobuf or grpc: the protocol must "
                "be one of these (or unset); http/json is not built in"
            )
        return value.strip()

    @property
    def otlp_traces_protocol_used(self) -> str:
        return self.otlp_traces_protocol or self.otlp_protocol or "http/protobuf"

    @property
    def tracing_enabled(self) -> bool:
        """Traces are exported when an OTLP endpoint is set and the SDK is not disabled."""
        return (
            self.otlp_endpoint is not None or self.otlp_traces_endpoint is not None
        ) and not self.otel_sdk_disabled

    def provider_config(self) -> ProviderConfig:
        """The provider keys and settings the worker's model adapters use."""
        return ProviderConfig(
            openai_api_key=self.openai_api_key,
            openai_base_url=self.openai_base_url,
            anthropic_api_key=self.anthropic_api_key,
            anthropic_base_url=self.anthropic_base_url,
            openai_continuation=self.openai_continuation,
            model_families=self.model_families,
            relay_url=self.relay_url,
            relay_secret=self.relay_secret,
        )

    def log_secrets(self) -> list[str]:
        """What no log line may show (the JSON formatter masks them): the provider keys, the
        metrics token, the relay's secret, the API keys, the store's password and the Temporal
        API key."""
        secrets = [
            secret.get_secret_value()
            for secret in (
                self.openai_api_key,
                self.anthropic_api_key,
                self.metrics_token,
                self.relay_secret,
            )
            if secret is not None
        ]
        if self.api_keys is not None:
            secrets += self.api_keys.masked()
        password = make_url(self.resolved_database_url()).password
        if password:
            secrets.append(str(password))
        with contextlib.suppress(TemporalConnectionConfigError):  # refused at connect, named
            api_key = connection_options().get("api_key")
            if isinstance(api_key, str) and api_key:
                secrets.append(api_key)
        return secrets

    def chunk_retention(self) -> timedelta | None:
        """None when closed chunk logs are kept forever."""
        return timedelta(hours=self.chunk_retention_hours) if self.chunk_retention_hours else None

    def turn_ui_url(self, submission_id: str) -> str:
        """The Temporal UI page of a submission's turn workflow."""
        base = (self.temporal_ui_url or f"http://127.0.0.1:{self.ui_port}").rstrip("/")
        namespace = quote(self.temporal_namespace, safe="")
        workflow_id = quote(turn_workflow_id(submission_id), safe="")
        return f"{base}/namespaces/{namespace}/workflows/{workflow_id}"

    def resolved_database_url(self) -> str:
        return self.database_url or default_sqlite_url(self.data_dir)
