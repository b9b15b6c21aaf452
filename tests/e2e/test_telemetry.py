"""Telemetry through the real stack: one trace per turn, metrics of real turns, JSON logs.

A stack of its own (SQLite, traced from its start: the client comes from `connect_temporal`
and the app is instrumented while an in-memory exporter is active), worker and gateway in one
process as `perdure dev` runs them.
"""

import asyncio
import dataclasses
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from gateway.app import create_app
from perdure.runtime.services import connect_temporal
from perdure.runtime.settings import ApiKeys, Settings
from perdure.telemetry import queue_depth, tracing
from perdure.telemetry.json_logs import JsonFormatter
from perdure.testing.chat_client import read_stream, send
from perdure.testing.fakeprovider.directives import parse
from perdure.testing.fakeprovider.script import make_plan
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.fakeprovider.transcript import from_chat
from perdure.testing.stack import Stack, running_stack
from tests.databases import database_url
from tests.served import STACK_AGENTS

WAIT_SECONDS = 20.0


@dataclasses.dataclass
class Traced:
    stack: Stack
    spans: InMemorySpanExporter


@pytest.fixture(scope="module")
async def traced(
    temporal_env: WorkflowEnvironment,
    provider_env: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Traced]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.activate(provider)
    try:
        address = temporal_env.client.service_client.config.target_host
        client = await connect_temporal(Settings.model_validate({"TEMPORAL_ADDRESS": address}))
        directory = tmp_path_factory.mktemp("telemetry")
        with database_url("sqlite", directory) as url:
            async with running_stack(
                client=client, database_url=url, data_dir=directory, agents=STACK_AGENTS
            ) as stack:
                yield Traced(stack=stack, spans=spans)
    finally:
        tracing.deactivate()
        provider.shutdown()


@pytest.fixture
async def http(traced: Traced) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=traced.stack.url, timeout=30) as client:
        yield client


def new_chat() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


async def eventually(found: Callable[[], Any], what: str) -> Any:
    """`found()` once it is truthy (polled; spans and log lines of a turn's last activity may
    land just after its stream ends)."""
    async with asyncio.timeout(WAIT_SECONDS):
        while not (value := found()):
            await asyncio.sleep(0.05)
    assert value, what
    return value


async def turn_spans(traced: Traced, submission_id: str, *names: str) -> list[ReadableSpan]:
    """The finished spans of this turn's trace, once every one of `names` is among them."""

    def complete() -> list[ReadableSpan] | None:
        spans = traced.spans.get_finished_spans()
        starts = [s for s in spans if s.name == "StartWorkflow:TurnWorkflow" and s.attributes]
        start = next(
            (
                s
                for s in starts
                if s.attributes
                and s.attributes.get("temporalWorkflowID") == f"turn-{submission_id}"
            ),
            None,
        )
        if start is None:
            return None
        trace = [s for s in spans if s.context.trace_id == start.context.trace_id]
        return trace if set(names) <= {s.name for s in trace} else None

    found: list[ReadableSpan] = await eventually(complete, f"spans {names}")
    return found


def named(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    return next(s for s in spans if s.name == name)


async def test_a_chat_turn_is_one_trace_from_the_http_post_to_the_model_step(
    traced: Traced, http: httpx.AsyncClient
) -> None:
    streamed = await send(http, new_chat(), "@count 3")
    submission = streamed.headers["x-perdure-submission-id"]

    spans = await turn_spans(
        traced,
        submission,
        "POST /api/chat",
        "RunWorkflow:TurnWorkflow",
        "RunActivity:perdure.model_step",
        "chat gpt-fake",
    )

    http_span = named(spans, "POST /api/chat")
    assert http_span.kind == SpanKind.SERVER
    assert http_span.parent is None  # the trace starts at the gateway
    model_step = named(spans, "RunActivity:perdure.model_step")
    chat_span = named(spans, "chat gpt-fake")
    assert chat_span.parent is not None
    assert chat_span.parent.span_id == model_step.context.span_id
    assert {s.context.trace_id for s in spans} == {http_span.context.trace_id}


async def test_the_model_step_span_has_the_genai_attributes_and_the_providers_tokens(
    traced: Traced, http: httpx.AsyncClient, fake_provider: FakeProvider
) -> None:
    text = f"@count 5 tokens-{uuid.uuid4().hex[:8]}"
    streamed = await send(http, new_chat(), text)
    submission = streamed.headers["x-perdure-submission-id"]

    spans = await turn_spans(traced, submission, "chat gpt-fake")

    (request,) = fake_provider.requests_for(text)
    plan = make_plan(from_chat(request.body), parse(request.user_text))
    attributes = dict(named(spans, "chat gpt-fake").attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.system"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt-fake"
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == plan.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == plan.output_tokens


async def test_a_tool_call_is_an_execute_tool_span_in_the_turns_trace(
    traced: Traced, http: httpx.AsyncClient
) -> None:
    streamed = await send(http, new_chat(), '@tool calculate {"expression": "6*7"}')
    submission = streamed.headers["x-perdure-submission-id"]
    call_id = next(c for c in streamed.chunks if c["type"] == "tool-input-available")["toolCallId"]

    spans = await turn_spans(traced, submission, "execute_tool calculate")

    attributes = dict(named(spans, "execute_tool calculate").attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "calculate"
    assert attributes["gen_ai.tool.call.id"] == call_id


Samples = dict[tuple[str, tuple[Any, ...]], float]


async def scrape(http: httpx.AsyncClient, **headers: str) -> Samples:
    """`GET /metrics`, parsed: value by (sample name, sorted labels)."""
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape_until(http: httpx.AsyncClient, ready: Callable[[Samples], bool]) -> Samples:
    """Scrape until `ready` (the worker counts a turn in its last activity, which may end
    just after the client saw the closing chunk)."""
    async with asyncio.timeout(WAIT_SECONDS):
        while not ready(samples := await scrape(http)):
            await asyncio.sleep(0.05)
    return samples


async def test_the_gateways_metrics_show_the_turns_its_in_process_worker_ran(
    http: httpx.AsyncClient,
) -> None:
    before = await scrape(http)
    completed = value(before, "perdure_turns_total", outcome="completed")

    await send(http, new_chat(), "@count 4")
    after = await scrape_until(
        http, lambda s: value(s, "perdure_turns_total", outcome="completed") > completed
    )

    assert value(after, "perdure_turns_total", outcome="completed") == completed + 1
    output_tokens = ("perdure_model_tokens_total", {"provider": "openai", "type": "output"})
    assert value(after, output_tokens[0], **output_tokens[1]) > value(
        before, output_tokens[0], **output_tokens[1]
    )


async def test_a_new_message_observes_time_to_first_token_and_relay_latency(
    http: httpx.AsyncClient,
) -> None:
    before = await scrape(http)

    await send(http, new_chat(), "@count 6")
    after = await scrape(http)

    ttft = "perdure_time_to_first_token_seconds_count"
    relay = "perdure_relay_latency_seconds_count"
    assert value(after, ttft) == value(before, ttft) + 1
    assert value(after, relay) > value(before, relay)


async def test_a_resumed_stream_observes_no_time_to_first_token(
    http: httpx.AsyncClient,
) -> None:
    chat = new_chat()
    await send(http, chat, "@count 3")
    before = await scrape(http)

    resumed = await read_stream(http, "GET", f"/api/chat/{chat}/stream", params={"after": -1})
    after = await scrape(http)

    assert resumed.done
    ttft = "perdure_time_to_first_token_seconds_count"
    assert value(after, ttft) == value(before, ttft)


async def started_minute_long_turn(http: httpx.AsyncClient, chat: str) -> asyncio.Task[None]:
    """A turn whose tool runs for a minute, read in the background: its stream stays open until
    the turn is stopped. Returns once the tool runs."""
    running = asyncio.Event()

    async def stream() -> None:
        async with http.stream(
            "POST",
            "/api/chat",
            json={
                "id": chat,
                "messages": [
                    {
                        "id": uuid.uuid4().hex[:16],
                        "role": "user",
                        "parts": [{"type": "text", "text": '@tool wait {"seconds": 60}'}],
                    }
                ],
            },
        ) as response:
            async for line in response.aiter_lines():
                if "tool-input-available" in line:
                    running.set()

    streaming = asyncio.create_task(stream())
    await asyncio.wait_for(running.wait(), WAIT_SECONDS)
    return streaming


async def test_an_open_stream_is_active_until_it_ends_and_a_stopped_turn_counts_aborted(
    http: httpx.AsyncClient,
) -> None:
    chat = new_chat()
    before = await scrape(http)
    aborted = value(before, "perdure_turns_total", outcome="aborted")
    streaming = await started_minute_long_turn(http, chat)
    during = await scrape(http)
    await http.post(f"/api/chat/{chat}/stop")
    await asyncio.wait_for(streaming, WAIT_SECONDS)
    after = await scrape_until(
        http, lambda s: value(s, "perdure_turns_total", outcome="aborted") > aborted
    )

    active = value(before, "perdure_active_streams")
    assert value(during, "perdure_active_streams") == active + 1
    assert value(after, "perdure_active_streams") == active
    assert value(after, "perdure_turns_total", outcome="aborted") == aborted + 1


async def test_queue_depth_counts_waiting_submissions_by_their_sessions_strategy(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_depth, "MAX_AGE", 0.0)  # read the store at every scrape
    chat = new_chat()
    before = await scrape(http)
    streaming = await started_minute_long_turn(http, chat)
    queued = await http.post(
        f"/v1/sessions/{chat}/submissions",
        json={
            "messages": [
                {
                    "id": "queued-1",
                    "role": "user",
                    "parts": [{"type": "text", "text": "@count 2"}],
                }
            ]
        },
    )
    during = await scrape(http)
    await http.post(f"/api/chat/{chat}/stop")
    await asyncio.wait_for(streaming, WAIT_SECONDS)

    assert queued.status_code == 202, queued.text
    waiting = value(before, "perdure_queue_depth", strategy="queue")
    assert value(during, "perdure_queue_depth", strategy="queue") == waiting + 1
    assert {"debounce", "merge", "latest"} <= {
        dict(labels)["strategy"] for name, labels in during if name == "perdure_queue_depth"
    }


def metrics_app(traced: Traced, **settings: Any) -> httpx.AsyncClient:
    """A client of another gateway app on the same services, with these settings."""
    configured = traced.stack.settings.model_copy(update=settings)
    app = create_app(services=dataclasses.replace(traced.stack.services, settings=configured))
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=traced.stack.url, timeout=30
    )


async def test_metrics_need_the_metrics_token_once_one_is_set(traced: Traced) -> None:
    from pydantic import SecretStr

    async with metrics_app(traced, metrics_token=SecretStr("scrape-token-1")) as client:
        refused = await client.get("/metrics")
        tenant_key = await client.get("/metrics", headers={"Authorization": "Bearer key-a"})
        allowed = await client.get("/metrics", headers={"Authorization": "Bearer scrape-token-1"})

    assert refused.status_code == 401
    assert tenant_key.status_code == 401
    assert allowed.status_code == 200
    assert "perdure_turns_total" in allowed.text


async def test_metrics_are_not_part_of_the_api_schema(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()

    assert "/metrics" not in schema["paths"]


async def test_metrics_are_registered_once_for_any_number_of_apps(traced: Traced) -> None:
    async with metrics_app(traced) as first, metrics_app(traced) as second:
        one = (await first.get("/metrics")).text
        two = (await second.get("/metrics")).text

    assert one.count("# TYPE perdure_turns_total counter") == 1
    assert two.count("# TYPE perdure_turns_total counter") == 1


async def test_a_turns_json_logs_carry_its_ids_and_neither_its_text_nor_the_api_key(
    traced: Traced,
) -> None:
    api_key = f"key-{uuid.uuid4().hex}"
    secret_text = f"confidential-{uuid.uuid4().hex}"
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        async with metrics_app(traced, api_keys=ApiKeys.parse(f"{api_key}:alpha")) as client:
            streamed = await send(
                client,
                new_chat(),
                f"@count 3 {secret_text}",
                headers={"Authorization": f"Bearer {api_key}"},
            )
            submission = streamed.headers["x-perdure-submission-id"]

            def logged() -> list[dict[str, Any]] | None:
                entries = [json.loads(line) for line in lines.getvalue().splitlines()]
                ended = [
                    e
                    for e in entries
                    if e.get("submission_id") == submission
                    and e["message"].startswith("turn ended")
                ]
                return entries if ended else None

            entries: list[dict[str, Any]] = await eventually(logged, "the turn's end logged")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)

    ours = [e for e in entries if e.get("submission_id") == submission]
    submitted = next(e for e in ours if e["message"].startswith("message submitted"))
    assert submitted["logger"] == "perdure.gateway"
    assert submitted["tenant_id"] == "alpha"
    assert submitted["request_id"]
    ended = next(e for e in ours if e["message"].startswith("turn ended"))
    assert ended["session_id"] == submitted["session_id"]
    assert secret_text not in lines.getvalue()
    assert api_key not in lines.getvalue()


async def test_a_provider_failure_and_its_recovery_are_counted_by_class_and_outcome(
    http: httpx.AsyncClient,
) -> None:
    errors = (
        "perdure_provider_errors_total",
        {"provider": "openai", "error_class": "server_error"},
    )
    incident = "perdure_recovery_incidents_total"
    before = await scrape(http)

    streamed = await send(http, new_chat(), f"@count 3 @fail 503 {uuid.uuid4().hex[:8]}")
    after = await scrape_until(
        http,
        lambda s: (
            value(s, incident, kind="retry", outcome="completed")
            > value(before, incident, kind="retry", outcome="completed")
        ),
    )

    assert streamed.chunks[-1]["type"] == "finish"
    assert value(after, errors[0], **errors[1]) == value(before, errors[0], **errors[1]) + 1
    for outcome in ("detected", "completed"):
        assert value(after, incident, kind="retry", outcome=outcome) == (
            value(before, incident, kind="retry", outcome=outcome) + 1
        )
