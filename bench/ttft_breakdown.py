"""Where each millisecond of time to first token goes, in `perdure dev`'s arrangement.

    .venv/bin/python -m bench.ttft_breakdown [--turns 50] [--head-start] [--provider-ttft-ms 0]

One process, as `perdure dev` runs it: the Temporal dev server (temporal-dev.yml), the worker
and the gateway on one client (eager workflow start), the SQLite store, the fake provider in a
thread. The bench wraps the functions a turn passes through (it changes no product code) and
records, per turn, the moment each stage is reached, then prints the p50/p95 of each stage's
share:

    POST sent → request parsed (HTTP, routing, body validation) → intake committed (the write
    transaction) → workflow started (eager?) → model step entered → the
    step's reads done (submission, log, active path: one read) → request leaving (the OpenAI
    client's `post`, after hooks and the request's building) → provider request sent (the
    fake has parsed it) → provider's first delta → first delta at the client

`--head-start`: with a relay in the process, as `perdure dev` runs it, and the gateway's head
start, which adds its own stages (head start entered, head start planned; "request leaving" is
then the head start's `post`), run beside the workflow's start. The stages are printed in the
order they are reached (p50), each share from the stage before it.
"""

import argparse
import asyncio
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
import openai
import uvicorn

import activities.model_step as model_step_module
import perdure.turn_control.lifecycle as lifecycle_module
from activities.head_start import HeadStart
from gateway.app import create_app
from perdure.agents_registry import load_agents
from perdure.domain.names import turn_workflow_id
from perdure.runtime.head_start import start_heads
from perdure.runtime.relay_service import dev_relay_secret, relay_config, relay_server
from perdure.runtime.services import open_services
from perdure.runtime.settings import Settings
from perdure.runtime.temporal_dev import DevServerConfig, dev_server
from perdure.runtime.worker import build_worker
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.stack import free_port

STAGES = [
    "request parsed",
    "head start entered",
    "head start planned",
    "intake committed",
    "workflow started",
    "model step entered",
    "step's reads done",
    "request leaving",
    "provider request sent",
    "provider first delta",
    "first delta at client",
]
marks: dict[str, dict[str, float]] = defaultdict(dict)
"""Per message id (the fake's user text for provider stages), stage → time.monotonic()."""
submissions: list[str] = []


def _mark(key: str, stage: str) -> None:
    marks[key].setdefault(stage, time.monotonic())


def _wrap_async(
    owner: Any,
    name: str,
    before: Callable[..., None] | None = None,
    after: Callable[..., None] | None = None,
) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before(*args, **kwargs)
        result = await original(*args, **kwargs)
        if after is not None:
            after(result, *args, **kwargs)
        return result

    setattr(owner, name, wrapped)


def instrument() -> None:
    plan = HeadStart.plan

    def planned(self: HeadStart, submission: Any, recent: Any) -> Any:
        _mark(submission.id, "head start entered")
        try:
            return plan(self, submission, recent)
        finally:
            _mark(submission.id, "head start planned")

    HeadStart.plan = planned  # type: ignore[method-assign]
    _wrap_async(
        lifecycle_module,
        "submit",
        before=lambda db, new, **k: _mark(new.chat_id, "request parsed"),
        after=lambda outcome, *a, **k: _mark(
            outcome.submission.assistant_message_id, "intake committed"
        ),
    )
    _wrap_async(
        lifecycle_module,
        "start_turn",
        after=lambda result, client, turn, **k: _mark(
            turn.input.turn.assistant_message_id, "workflow started"
        ),
    )
    _wrap_async(
        model_step_module,
        "read_step_inputs",
        before=lambda db, **k: _mark(k["submission_id"], "model step entered"),
        after=lambda inputs, db, **k: _mark(k["submission_id"], "step's reads done"),
    )
    _wrap_async(
        openai.AsyncOpenAI,
        "post",
        before=lambda client, path, **kwargs: _mark(_user_text(kwargs), "request leaving"),
    )


def _user_text(kwargs: dict[str, Any]) -> str:
    """The last user message of a Chat Completions body (the bench's turns are one message)."""
    messages = kwargs.get("body", {}).get("messages", [])
    users = [m for m in messages if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def one_turn(
    http: httpx.AsyncClient, fake: FakeProvider, provider_ttft_ms: int
) -> dict[str, float] | None:
    ttft = f"@ttft {provider_ttft_ms} " if provider_ttft_ms else ""
    text = f"{ttft}@count 5 @delay 5 bench-{uuid.uuid4().hex[:10]}"
    body = {
        "id": f"bench-{uuid.uuid4().hex[:12]}",
        "messages": [
            {"id": uuid.uuid4().hex[:16], "role": "user", "parts": [{"type": "text", "text": text}]}
        ],
    }
    posted = time.monotonic()
    message_id = None
    first_at = None
    async with http.stream("POST", "/api/chat", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"type":"start"' in line:
                message_id = line.split('"messageId":"', 1)[1].split('"', 1)[0]
            if first_at is None and '"type":"text-delta"' in line:
                first_at = time.monotonic()
    (request,) = fake.requests_for(text)
    if message_id is None or first_at is None or request.first_delta_at is None:
        return None
    stages = marks.pop(message_id, {})
    submission_id = response.headers.get("x-perdure-submission-id", "")
    submissions.append(submission_id)
    stages.update(marks.pop(submission_id, {}))
    stages.update(marks.pop(body["id"], {}))  # the session id
    stages.update(marks.pop(text, {}))
    stages["provider request sent"] = request.started_at
    stages["provider first delta"] = request.first_delta_at
    stages["first delta at client"] = first_at
    return {stage: (at - posted) * 1000 for stage, at in stages.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--head-start", action="store_true")
    parser.add_argument("--provider-ttft-ms", type=int, default=0)
    args = parser.parse_args()
    instrument()
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = free_port()
        settings = Settings.model_validate(
            {
                "PERDURE_DATA_DIR": str(workdir),
                "PERDURE_MODEL": "openai:gpt-bench",
                "PERDURE_PORT": port,
                "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
                **fake.env(),  # the provider's URL and key, read through Settings
                "PERDURE_HEAD_START": args.head_start,
            }
        )
        relay: uvicorn.Server | None = None
        if args.head_start:
            relay_port = free_port()
            secret = dev_relay_secret()
            relay = relay_server(relay_config(settings, secret), host="127.0.0.1", port=relay_port)
            settings = settings.model_copy(
                update={"relay_url": f"http://127.0.0.1:{relay_port}", "relay_secret": secret}
            )
        async with (
            dev_server(
                address=settings.temporal_address,
                ui_port=None,
                db_file=workdir / "temporal.db",
                namespace="default",
                config=DevServerConfig.load(Path("temporal-dev.yml")),
            ),
            open_services(settings) as services,
        ):
            services.eager_start = True
            services.bus.reliable = True
            agents = load_agents(None)
            worker = build_worker(services, agents)
            start_heads(services, agents)
            relaying = asyncio.create_task(relay.serve()) if relay is not None else None
            server = uvicorn.Server(
                uvicorn.Config(create_app(services=services), port=port, log_level="warning")
            )
            async with worker:
                serving = asyncio.create_task(server.serve())
                while not server.started or (relay is not None and not relay.started):
                    await asyncio.sleep(0.01)
                rows: list[dict[str, float]] = []
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}", timeout=60
                ) as http:
                    for _ in range(5):
                        await one_turn(http, fake, args.provider_ttft_ms)
                    for _ in range(args.turns):
                        row = await one_turn(http, fake, args.provider_ttft_ms)
                        if row is not None:
                            rows.append(row)
                eager = 0
                for submission_id in submissions[-args.turns :]:
                    handle = services.client.get_workflow_handle(turn_workflow_id(submission_id))
                    async for event in handle.fetch_history_events():
                        started = event.workflow_execution_started_event_attributes
                        eager += bool(started.eager_execution_accepted)
                        break
                server.should_exit = True
                await serving
                if relay is not None and relaying is not None:
                    relay.should_exit = True
                    await relaying
    print(f"{len(rows)} turns; eager workflow start accepted for {eager} of {args.turns}")
    print("milliseconds after POST, and each stage's own share")
    print("| stage | at p50 | at p95 | stage p50 | stage p95 |")
    print("|---|---|---|---|---|")
    previous: str | None = None
    reached = [stage for stage in STAGES if any(stage in row for row in rows)]
    for stage in sorted(reached, key=lambda s: percentile([r[s] for r in rows if s in r], 50)):
        at = [row[stage] for row in rows if stage in row]
        share = [
            row[stage] - (row[previous] if previous else 0.0)
            for row in rows
            if stage in row and (previous is None or previous in row)
        ]
        print(
            f"| {stage} | {percentile(at, 50):.1f} | {percentile(at, 95):.1f} "
            f"| {percentile(share, 50):.1f} | {percentile(share, 95):.1f} |"
        )
        previous = stage


if __name__ == "__main__":
    asyncio.run(main())
