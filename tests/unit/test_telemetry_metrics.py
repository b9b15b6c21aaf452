"""Prometheus metrics: bounded labels, what a stream measures, scraping, and never raising."""

import logging
import time
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client import REGISTRY

from perdure.domain.concurrency import STRATEGIES
from perdure.runtime.worker_health import WorkerHealth
from perdure.telemetry import metrics
from perdure.telemetry.metrics import QueueDepth, RelayMeter, authorized, error_class, never_raises
from perdure.telemetry.metrics_server import serve_metrics


def sample(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


@dataclass
class Failure:
    status: int | None = None
    retryable: bool = False
    context_overflow: bool = False
    prefill_rejected: bool = False


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Failure(status=429, retryable=True), "rate_limited"),
        (Failure(status=408, retryable=True), "timeout"),
        (Failure(status=409, retryable=True), "conflict"),
        (Failure(status=401), "auth"),
        (Failure(status=403), "auth"),
        (Failure(status=503, retryable=True), "server_error"),
        (Failure(status=400), "bad_request"),
        (Failure(status=400, context_overflow=True), "context_overflow"),
        (Failure(status=400, prefill_rejected=True), "prefill_rejected"),
        (Failure(retryable=True), "connection"),
        (Failure(), "stream_error"),
    ],
)
def test_provider_failures_are_counted_by_a_class_from_a_fixed_set(
    failure: Failure, expected: str
) -> None:
    assert error_class(failure) == expected
    assert expected in metrics.ERROR_CLASSES


def test_a_provider_error_is_counted_under_its_provider_api_not_its_model() -> None:
    before = sample(
        "perdure_provider_errors_total", provider="anthropic", error_class="rate_limited"
    )

    metrics.provider_error("anthropic:claude-sonnet-4-5", Failure(status=429, retryable=True))

    after = sample(
        "perdure_provider_errors_total", provider="anthropic", error_class="rate_limited"
    )
    assert after == before + 1


def test_label_values_outside_their_fixed_set_become_other() -> None:
    before = sample("perdure_turns_total", outcome="other")

    metrics.turn_ended("session-1234-of-tenant-acme")

    assert sample("perdure_turns_total", outcome="other") == before + 1
    assert metrics.provider_api("my-own-provider:model") == "other"


def test_a_failing_recording_is_logged_once_and_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @never_raises
    def broken_recording() -> None:
        raise RuntimeError("registry gone")

    with caplog.at_level(logging.ERROR, logger="perdure.telemetry"):
        broken_recording()
        broken_recording()

    assert [r.getMessage() for r in caplog.records].count(
        "recording metrics (broken_recording) failed; later failures are not logged"
    ) == 1


def test_a_stream_is_active_from_open_to_close_once() -> None:
    meter = RelayMeter()
    before = sample("perdure_active_streams")

    meter.opened()
    during = sample("perdure_active_streams")
    meter.closed()
    meter.closed()

    assert during == before + 1
    assert sample("perdure_active_streams") == before


def test_time_to_first_token_is_observed_once_at_the_first_text_chunk() -> None:
    meter = RelayMeter(accepted_at=time.monotonic())
    before = sample("perdure_time_to_first_token_seconds_count")

    meter.relayed({"type": "start"})
    meter.relayed({"type": "text-start", "id": "t"})
    observed_before_text = sample("perdure_time_to_first_token_seconds_count")
    meter.relayed({"type": "text-delta", "id": "t", "delta": "hi"})
    meter.relayed({"type": "text-delta", "id": "t", "delta": " there"})

    assert observed_before_text == before
    assert sample("perdure_time_to_first_token_seconds_count") == before + 1


def test_a_stream_that_answers_no_new_message_observes_no_time_to_first_token() -> None:
    meter = RelayMeter(accepted_at=None)
    before = sample("perdure_time_to_first_token_seconds_count")

    meter.relayed({"type": "text-delta", "id": "t", "delta": "replayed"})

    assert sample("perdure_time_to_first_token_seconds_count") == before


def test_relay_latency_is_observed_for_chunks_that_came_live_from_the_log() -> None:
    meter = RelayMeter()
    count = sample("perdure_relay_latency_seconds_count")
    total = sample("perdure_relay_latency_seconds_sum")

    meter.relayed({"type": "text-delta"})  # read before the response: not a live relay
    meter.relayed({"type": "text-delta"}, committed_at=time.time() - 0.2)

    assert sample("perdure_relay_latency_seconds_count") == count + 1
    assert sample("perdure_relay_latency_seconds_sum") >= total + 0.2


def test_queue_depth_is_absent_until_read_then_shows_every_strategy() -> None:
    gauge = QueueDepth()
    assert list(gauge.collect()) == []

    gauge.update({"queue": 3, "debounce": 1})
    (family,) = gauge.collect()

    values = {s.labels["strategy"]: s.value for s in family.samples}
    assert values == {**dict.fromkeys(STRATEGIES, 0), "queue": 3, "debounce": 1}


def test_without_a_token_metrics_are_open_and_with_one_only_its_bearer_reads_them() -> None:
    assert authorized(None, None)
    assert authorized("Bearer s3cret", "s3cret")
    assert authorized("bearer s3cret", "s3cret")
    assert not authorized(None, "s3cret")
    assert not authorized("Bearer wrong", "s3cret")
    assert not authorized("Basic s3cret", "s3cret")


def test_the_worker_metrics_server_serves_the_text_format_on_a_free_port() -> None:
    server = serve_metrics("127.0.0.1", 0, health=WorkerHealth().answer)
    try:
        response = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
    finally:
        server.close()

    assert server.port > 0
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "# TYPE perdure_turns_total counter" in response.text


def test_the_worker_metrics_server_refuses_a_scrape_without_its_token() -> None:
    server = serve_metrics("127.0.0.1", 0, health=WorkerHealth().answer, token="scrape-token")
    try:
        refused = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
        allowed = httpx.get(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={"Authorization": "Bearer scrape-token"},
            timeout=10,
        )
    finally:
        server.close()

    assert refused.status_code == 401
    assert "perdure_" not in refused.text
    assert allowed.status_code == 200
