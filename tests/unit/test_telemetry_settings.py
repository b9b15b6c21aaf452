"""The telemetry settings: what each accepts, and the clear refusal of what it does not."""

import pytest
from pydantic import ValidationError

from perdure.runtime.settings import Settings


def settings(**values: object) -> Settings:
    return Settings.model_validate(values)


def test_logs_are_text_unless_json_is_asked_for() -> None:
    assert settings().log_format == "text"
    assert settings(PERDURE_LOG_FORMAT="JSON").log_format == "json"


def test_an_unknown_log_format_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValidationError, match="PERDURE_LOG_FORMAT must be text or json"):
        settings(PERDURE_LOG_FORMAT="yaml")


def test_tracing_is_off_without_an_otlp_endpoint() -> None:
    assert not settings().tracing_enabled


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_either_otlp_endpoint_turns_tracing_on(variable: str) -> None:
    assert settings(**{variable: "http://collector:4318"}).tracing_enabled


def test_a_disabled_sdk_keeps_tracing_off_with_an_endpoint() -> None:
    configured = settings(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318", OTEL_SDK_DISABLED="true"
    )
    assert not configured.tracing_enabled


def test_an_otlp_endpoint_must_be_an_http_url() -> None:
    with pytest.raises(ValidationError, match="http:// or https://"):
        settings(OTEL_EXPORTER_OTLP_ENDPOINT="collector:4317")


def test_otlp_is_http_protobuf_unless_grpc_is_asked_for() -> None:
    assert settings().otlp_traces_protocol_used == "http/protobuf"
    assert settings(OTEL_EXPORTER_OTLP_PROTOCOL="grpc").otlp_traces_protocol_used == "grpc"


def test_the_traces_protocol_wins_over_the_general_one() -> None:
    chosen = settings(
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf"
    )
    assert chosen.otlp_traces_protocol_used == "http/protobuf"


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_an_otlp_protocol_that_is_not_built_in_is_refused_rather_than_ignored(
    variable: str,
) -> None:
    with pytest.raises(ValidationError, match="http/json is not built in"):
        settings(**{variable: "http/json"})


def test_the_worker_metrics_port_is_off_by_default_and_0_means_any_free_port() -> None:
    assert settings().metrics_port is None
    assert settings(PERDURE_METRICS_PORT="0").metrics_port == 0
    with pytest.raises(ValidationError):
        settings(PERDURE_METRICS_PORT="70000")


def test_the_metrics_token_never_shows_in_the_settings_repr() -> None:
    configured = settings(PERDURE_METRICS_TOKEN="scrape-secret-123")
    assert "scrape-secret-123" not in repr(configured)
    assert configured.metrics_token is not None
    assert configured.metrics_token.get_secret_value() == "scrape-secret-123"
