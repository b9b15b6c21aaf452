"""Prometheus metrics of a Perdure process (docs/operations.md, "Telemetry", lists them).

Every metric lives in prometheus_client's default registry, defined once when this module is
first imported: `perdure dev` runs worker and gateway in one process and its gateway's
`/metrics` shows both sides' numbers, registered once. Label values come from small fixed
sets (never a tenant, session, chat or user id: they would be unbounded and private).

Recording never raises: a failure is logged once per function and the turn goes on.
"""

import functools
import hmac
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ParamSpec, Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from perdure.domain.concurrency import STRATEGIES

log = logging.getLogger("perdure.telemetry")

# No `…_created` series beside every counter and histogram: a timestamp per series that no
# dashboard needs, doubling what a scrape carries.
disable_created_metrics()  # type: ignore[no-untyped-call]

P = ParamSpec("P")

OUTCOMES = ("completed", "aborted", "error", "skipped", "exhausted")
PROVIDERS = ("openai", "openai-responses", "anthropic", "demo")
RECOVERY_KINDS = ("retry", "continue")
RECOVERY_OUTCOMES = ("detected", "completed", "exhausted", "skipped")
ERROR_CLASSES = (
    "rate_limited",
    "timeout",
    "conflict",
    "auth",
    "bad_request",
    "server_error",
    "context_overflow",
    "prefill_rejected",
    "connection",
    "stream_error",
    "stalled",
)
OTHER = "other"
"""The label value of anything outside its fixed set."""

TURNS = Counter(
    "perdure_turns",
    "Turns ended, by outcome (exhausted: the recovery budget was spent).",
    ["outcome"],
)
TIME_TO_FIRST_TOKEN = Histogram(
    "perdure_time_to_first_token_seconds",
    "From the gateway accepting a new chat message (POST /api/chat) to it writing the "
    "answer's first text chunk to the client.",
    buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0),
)
RELAY_LATENCY = Histogram(
    "perdure_relay_latency_seconds",
    "From a chunk's row being written to the log (its created_at, wall clock) to the gateway "
    "writing the chunk to a live stream's client.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
ACTIVE_STREAMS = Gauge("perdure_active_streams", "Answer streams the gateway is relaying now.")
HEAD_STARTS = Counter(
    "perdure_head_starts",
    'First provider requests sent at intake, before the step (docs/relay.md, "Head start"), '
    "by outcome: started, late (its step had sent its own request), failed (the gateway could "
    "not send it); at the relay: adopted (the "
    "step sent the same request), superseded (it sent another; the early one was cancelled), "
    "unclaimed (no step came in time), cancelled (the turn was stopped first).",
    ["outcome"],
)
HEAD_START_OUTCOMES = (
    "started",
    "late",
    "failed",
    "adopted",
    "superseded",
    "unclaimed",
    "cancelled",
)
RECOVERY_INCIDENTS = Counter(
    "perdure_recovery_incidents",
    "Recovery incidents of model steps: once when detected, once when they end (completed, "
    "exhausted or skipped), by kind (retry or continue).",
    ["kind", "outcome"],
)
RECOVERY_ATTEMPTS = Counter(
    "perdure_recovery_attempts", "Retried model steps that went on recovering, by kind.", ["kind"]
)
PROVIDER_ERRORS = Counter(
    "perdure_provider_errors",
    "Model provider failures seen by model steps, by provider API and class.",
    ["provider", "error_class"],
)
MODEL_TOKENS = Counter(
    "perdure_model_tokens",
    "Tokens the providers reported for model steps, by provider API and type (input, output).",
    ["provider", "type"],
)

_failed: set[str] = set()


def never_raises(record: Callable[P, None]) -> Callable[P, None]:
    """Metrics must never break a turn: log the first failure of `record`, swallow them all."""

    @functools.wraps(record)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            record(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a metric is never worth a turn
            if record.__name__ not in _failed:
                _failed.add(record.__name__)
                log.exception(
                    "recording metrics (%s) failed; later failures are not logged", record.__name__
                )

    return guarded


def _bounded(value: str, allowed: Iterable[str]) -> str:
    return value if value in allowed else OTHER


def provider_api(model: str) -> str:
    """The provider API of a model string (`openai:gpt-4.1-mini` → `openai`; `demo`)."""
    return _bounded(model.split(":", 1)[0], PROVIDERS)


@never_raises
def turn_ended(outcome: str) -> None:
    TURNS.labels(outcome=_bounded(outcome, OUTCOMES)).inc()


@never_raises
def recovery(kind: str, outcome: str) -> None:
    RECOVERY_INCIDENTS.labels(
        kind=_bounded(kind, RECOVERY_KINDS), outcome=_bounded(outcome, RECOVERY_OUTCOMES)
    ).inc()


@never_raises
def recovery_attempt(kind: str) -> None:
    RECOVERY_ATTEMPTS.labels(kind=_bounded(kind, RECOVERY_KINDS)).inc()


class ClassifiedError(Protocol):
    """What activities/providers/errors.py knows of a provider failure (`ProviderError`)."""

    status: int | None
    retryable: bool
    context_overflow: bool
    prefill_rejected: bool


def error_class(error: ClassifiedError) -> str:
    """A provider failure's class, one of `ERROR_CLASSES` (docs/operations.md says each)."""
    if error.context_overflow:
        return "context_overflow"
    if error.prefill_rejected:
        return "prefill_rejected"
    status = error.status
    if status is None:
        # No HTTP status: a dropped connection or a timeout (retryable), or an error event
        # inside a 200 stream.
        return "connection" if error.retryable else "stream_error"
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status == 409:
        return "conflict"
    if status in (401, 403):
        return "auth"
    if status >= 500:
        return "server_error"
    return "bad_request"


@never_raises
def provider_error(model: str, error: ClassifiedError) -> None:
    PROVIDER_ERRORS.labels(provider=provider_api(model), error_class=error_class(error)).inc()


@never_raises
def provider_stalled(model: str) -> None:
    PROVIDER_ERRORS.labels(provider=provider_api(model), error_class="stalled").inc()


@never_raises
def model_tokens(model: str, input_tokens: int | None, output_tokens: int | None) -> None:
    provider = provider_api(model)
    if input_tokens:
        MODEL_TOKENS.labels(provider=provider, type="input").inc(input_tokens)
    if output_tokens:
        MODEL_TOKENS.labels(provider=provider, type="output").inc(output_tokens)


@never_raises
def head_start(outcome: str) -> None:
    HEAD_STARTS.labels(outcome=_bounded(outcome, HEAD_START_OUTCOMES)).inc()


class RelayMeter:
    """One answer stream: counted active while open; the time to its first text chunk (when
    it answers a new message); the relay latency of every live chunk."""

    def __init__(self, accepted_at: float | None = None) -> None:
        self._accepted_at = accepted_at
        """`time.monotonic()` when the gateway accepted the message this stream answers."""
        self._open = False

    @never_raises
    def opened(self) -> None:
        ACTIVE_STREAMS.inc()
        self._open = True

    @never_raises
    def closed(self) -> None:
        if self._open:
            self._open = False
            ACTIVE_STREAMS.dec()

    @never_raises
    def relayed(self, chunk: dict[str, Any], committed_at: float | None = None) -> None:
        """`chunk` was written to the client; `committed_at` is its row's `created_at` (wall
        clock) when it came live from the log, None when it was read before the response."""
        if committed_at is not None:
            RELAY_LATENCY.observe(max(0.0, time.time() - committed_at))
        if self._accepted_at is not None and chunk.get("type") == "text-delta":
            TIME_TO_FIRST_TOKEN.observe(max(0.0, time.monotonic() - self._accepted_at))
            self._accepted_at = None


class QueueDepth:
    """`perdure_queue_depth{strategy}`: submissions waiting, by their session's concurrency
    strategy, as last read from the store (telemetry/queue_depth.py). A process that never
    read it (a worker) shows no such metric rather than a wrong zero."""

    NAME = "perdure_queue_depth"
    HELP = (
        "Submissions waiting for their session (pending), by the concurrency strategy of the "
        "session's agent, read from the store at scrape time (the same in every gateway)."
    )

    def __init__(self) -> None:
        self.snapshot: dict[str, int] | None = None
        self.read_at = 0.0
        """`time.monotonic()` of the snapshot's read."""

    def update(self, counts: dict[str, int] | None) -> None:
        self.snapshot = counts
        self.read_at = time.monotonic()

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self.NAME, self.HELP, labels=["strategy"])]

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot
        if snapshot is None:
            return
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["strategy"])
        for strategy in (*STRATEGIES, OTHER):
            if strategy in STRATEGIES or snapshot.get(strategy):
                family.add_metric([strategy], snapshot.get(strategy, 0))
        yield family


QUEUE_DEPTH = QueueDepth()
REGISTRY.register(QUEUE_DEPTH)


def exposition() -> tuple[bytes, str]:
    """The text format of every metric of this process, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def authorized(authorization: str | None, token: str | None) -> bool:
    """Whether a scrape may read the metrics: always without a token; with one, only with
    `Authorization: Bearer <token>` (compared in constant time)."""
    if token is None:
        return True
    if authorization is None:
        return False
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())
