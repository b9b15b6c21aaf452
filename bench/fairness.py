"""One tenant's burst beside another tenant's chats: does tenant B still get its answers?

    .venv/bin/python -m bench.fairness [--burst 300] [--chats 10] [--after-ms 200]
                                       [--store sqlite|postgres] [--fairness both|on|off]
                                       [--count 30] [--delay-ms 50] [--timeout 300]

For each setting of the Temporal dev server (`matching.enableFairness` on, as `perdure dev`
runs it, and off), a fresh cluster of real processes: the dev server, the fake provider,
one `perdure worker`, one `perdure gateway` with API keys of tenants A and B. Then:

1. B alone: `--chats` chats at once; B's time to first token (POST sent → first text delta)
   p50 / p95;
2. A sends `--burst` chats at once and B its `--chats` `--after-ms` later; B's time to first
   token p50 / p95 again, A's, and the wall until the last answer.

Every answer is `@count 30 @delay 50`: 30 tokens at 20 tokens/s. Each turn carries its
tenant's fairness key (and Perdure's interactive priority), so with fairness on Temporal's
matching service hands out the two tenants' backlogged tasks in turns instead of in arrival
order. Every answer is checked: the text is exactly `1 … 30` and the stream ended with its
`finish`. The target: B's p50 / p95 within 2× of B alone.
"""

import argparse
import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from sqlalchemy import create_engine, select
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench._support import SERVED, CpuMeter, Observation, RemoteFakeProvider, p50_p95
from bench.latency import percentile
from perdure.domain.names import turn_workflow_id
from perdure.runtime.temporal_dev import FAIRNESS_SETTING, DevServerConfig
from perdure.testing.chat_client import counting
from perdure.testing.cluster import CountingTurn, running_cluster
from perdure.testing.databases import database_url
from storage.tables import SubmissionRow
from storage.urls import sync_url

KEYS = {"tenant-a": "bench-key-a", "tenant-b": "bench-key-b"}


@dataclass
class Phase:
    """One tenant's chats of one phase."""

    turns: list[CountingTurn]
    to_provider_ms: list[float] = field(default_factory=list)
    """POST sent → the turn's provider request arrived (intake, Temporal, the worker)."""
    provider_first_ms: list[float] = field(default_factory=list)
    """The provider request arrived → its first delta written (the fake provider's share)."""
    to_client_ms: list[float] = field(default_factory=list)
    """The first delta written → received here (the log and the relay)."""
    _request_times: list[float | None] = field(default_factory=list)
    history_ms: dict[str, list[float]] = field(default_factory=dict)
    """From Temporal's history of each turn: how long each leg before the model step took."""

    async def split_history(
        self, client: Client, wall_offset: float, stored_at: dict[str, float]
    ) -> None:
        """POST → the submission stored → the workflow started → its first workflow task
        started → the model step scheduled → the provider request (the store's and Temporal's
        times are wall clock: `wall_offset` is `time.time() - time.monotonic()` here)."""
        legs: dict[str, list[float]] = {
            "POST → submission stored": [],
            "→ workflow started": [],
            "→ first workflow task started": [],
            "→ model step scheduled": [],
            "→ provider request": [],
        }
        for turn, request_at in zip(self.turns, self._request_times, strict=True):
            submission = submission_id(turn)
            if submission is None or request_at is None or submission not in stored_at:
                continue
            times = await milestones(client, turn_workflow_id(submission))
            if times is None:
                continue
            posted = turn.posted_at + wall_offset
            started, task, scheduled = times
            stored = stored_at[submission]
            for name, value in zip(
                legs,
                (
                    stored - posted,
                    started - stored,
                    task - started,
                    scheduled - task,
                    request_at + wall_offset - scheduled,
                ),
                strict=True,
            ):
                legs[name].append(value * 1000)
        self.history_ms = legs

    def split(self, observation: Observation) -> None:
        """Where each turn's time to first token went, from the fake provider's own clock."""
        by_text = {request.user_text: request for request in observation.requests}
        self._request_times = [
            by_text[t.user_text].started_at if t.user_text in by_text else None for t in self.turns
        ]
        for turn in self.turns:
            request, first = by_text.get(turn.user_text), turn.first_token_seconds()
            if request is None or not request.delta_times or first is None:
                continue
            self.to_provider_ms.append((request.started_at - turn.posted_at) * 1000)
            self.provider_first_ms.append((request.delta_times[0] - request.started_at) * 1000)
            self.to_client_ms.append((turn.posted_at + first - request.delta_times[0]) * 1000)

    @property
    def ttft_ms(self) -> list[float]:
        return [s * 1000 for t in self.turns if (s := t.first_token_seconds()) is not None]

    @property
    def exact(self) -> int:
        return sum(
            1
            for t in self.turns
            if not t.errors() and t.stream.done and t.stream.text() == counting(t.count)
        )


@dataclass
class SettingResult:
    fairness: bool
    b_alone: Phase | None = None
    a_burst: Phase | None = None
    b_beside: Phase | None = None
    wall: float = 0.0
    cpu: str = ""
    notes: list[str] = field(default_factory=list)


def submission_id(turn: CountingTurn) -> str | None:
    for _, chunk in turn.stream.events:
        if chunk.get("type") == "start":
            return str((chunk.get("messageMetadata") or {}).get("submissionId"))
    return None


async def milestones(client: Client, workflow_id: str) -> tuple[float, float, float] | None:
    """Wall-clock times of a turn's start, its first workflow task's start and its first
    activity's scheduling (the model step)."""
    started = task = scheduled = None
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        at = event.event_time.ToDatetime().replace(tzinfo=UTC).timestamp()
        kind = EventType.Name(event.event_type)
        if kind == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED":
            started = at
        elif kind == "EVENT_TYPE_WORKFLOW_TASK_STARTED" and task is None:
            task = at
        elif kind == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            scheduled = at
            break
    if started is None or task is None or scheduled is None:
        return None
    return started, task, scheduled


def submission_times(url: str) -> dict[str, float]:
    """When each submission was stored (its row's `created_at`, wall clock, stamped in the
    intake's transaction)."""
    engine = create_engine(sync_url(url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(select(SubmissionRow.id, SubmissionRow.created_at))
            return {str(submission): float(created) for submission, created in rows}
    finally:
        engine.dispose()


def turns(tag: str, n: int, count: int, delay_ms: int) -> list[CountingTurn]:
    return [CountingTurn(f"{tag}-{i}-{uuid.uuid4().hex[:6]}", count, delay_ms) for i in range(n)]


@contextlib.asynccontextmanager
async def tenant_client(
    url: str, tenant: str, chats: int, timeout: float
) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {KEYS[tenant]}"},
        timeout=httpx.Timeout(timeout, connect=30),
        limits=httpx.Limits(max_connections=chats + 10),
    ) as client:
        yield client


async def run_all(client: httpx.AsyncClient, chats: list[CountingTurn], timeout: float) -> None:
    await asyncio.gather(*(turn.run(client, timeout) for turn in chats))


async def one_setting(args: argparse.Namespace, fairness: bool) -> SettingResult:
    result = SettingResult(fairness=fairness)
    config = DevServerConfig(
        dynamic_config={**DevServerConfig().dynamic_config, FAIRNESS_SETTING: fairness}
    )
    with TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with RemoteFakeProvider(workdir) as fake, database_url(args.store, workdir) as url:
            async with running_cluster(workdir, fake, url, SERVED) as cluster:
                cluster.env["PERDURE_API_KEYS"] = ",".join(
                    f"{key}:{tenant}" for tenant, key in KEYS.items()
                )
                async with cluster.temporal(config=config) as temporal:
                    worker = cluster.worker()
                    gateway = await cluster.gateway()
                    await cluster.wait_polling(worker)
                    pids = {
                        "worker": worker.pid,
                        "gateway": cluster.last_gateway.pid,
                        "fake provider": fake.pid,
                    }
                    if hasattr(temporal, "pid"):
                        pids["temporal"] = temporal.pid
                    await measure(args, gateway, result, CpuMeter(pids))
                    observed = await fake.observe()
                    client = await cluster.client()
                    for phase in (result.b_alone, result.a_burst, result.b_beside):
                        assert phase is not None
                        phase.split(observed)
                    stored_at = await asyncio.to_thread(submission_times, url)
                    for phase in (result.b_alone, result.b_beside):
                        assert phase is not None
                        await phase.split_history(client, time.time() - time.monotonic(), stored_at)
    return result


async def measure(
    args: argparse.Namespace, gateway: str, result: SettingResult, meter: CpuMeter
) -> None:
    total = args.burst + args.chats
    async with (
        tenant_client(gateway, "tenant-a", total, args.timeout) as a,
        tenant_client(gateway, "tenant-b", total, args.timeout) as b,
    ):
        await run_all(a, turns("warm-a", 1, args.count, args.delay_ms), args.timeout)
        await run_all(b, turns("warm-b", 1, args.count, args.delay_ms), args.timeout)
        alone = turns("b-alone", args.chats, args.count, args.delay_ms)
        await run_all(b, alone, args.timeout)
        result.b_alone = Phase(alone)
        await asyncio.sleep(2)  # let the alone phase's turns finish their last tasks
        burst = turns("a-burst", args.burst, args.count, args.delay_ms)
        beside = turns("b-beside", args.chats, args.count, args.delay_ms)
        meter.start()
        started = time.monotonic()
        a_task = asyncio.create_task(run_all(a, burst, args.timeout))
        await asyncio.sleep(args.after_ms / 1000)
        await run_all(b, beside, args.timeout)
        await a_task
        result.wall = time.monotonic() - started
        meter.stop()
        result.cpu = meter.summary(result.wall)
        result.a_burst, result.b_beside = Phase(burst), Phase(beside)


def cell(values: list[float]) -> str:
    """`p50 / p95` (a table cell: no pipe)."""
    return p50_p95(values, 0).replace(" | ", " / ")


def report(args: argparse.Namespace, results: list[SettingResult]) -> None:
    print(
        f"\n{args.burst} chats of tenant A at once, {args.chats} of tenant B {args.after_ms} ms "
        f"later ({args.store}; answers of {args.count} tokens at {1000 // args.delay_ms}/s)\n"
    )
    print(
        "| fairness | B alone: TTFT ms p50 / p95 | B beside A's burst | ratio p50 / p95 "
        "| A's burst | exact (A, B) | wall s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        assert r.b_alone and r.b_beside and r.a_burst
        alone, beside = r.b_alone.ttft_ms, r.b_beside.ttft_ms
        ratio = "– / –"
        if alone and beside:
            ratio = (
                f"×{percentile(beside, 50) / percentile(alone, 50):.1f} / "
                f"×{percentile(beside, 95) / percentile(alone, 95):.1f}"
            )
        print(
            f"| {'on' if r.fairness else 'off'} | {cell(alone)} | {cell(beside)} | "
            f"{ratio} | {cell(r.a_burst.ttft_ms)} | "
            f"{r.a_burst.exact}/{len(r.a_burst.turns)}, {r.b_beside.exact}/{len(r.b_beside.turns)}"
            f" | {r.wall:.1f} |"
        )
    for r in results:
        assert r.b_alone and r.b_beside
        print(f"\nfairness {'on' if r.fairness else 'off'}: {r.cpu}")
        for name, phase in (("B alone", r.b_alone), ("B beside", r.b_beside)):
            print(
                f"  {name}, ms p50 / p95: POST → provider request "
                f"{cell(phase.to_provider_ms)}, provider request → first delta "
                f"{cell(phase.provider_first_ms)}, first delta → client "
                f"{cell(phase.to_client_ms)}"
            )
            legs = ", ".join(f"{leg} {cell(values)}" for leg, values in phase.history_ms.items())
            print(f"    before the provider, from Temporal's history: {legs}")


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__)
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--after-ms", type=int, default=200)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--fairness", choices=("both", "on", "off"), default="both")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--delay-ms", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    settings = {"both": [True, False], "on": [True], "off": [False]}[args.fairness]
    results = []
    for fairness in settings:
        print(f"fairness {'on' if fairness else 'off'}: starting a cluster", flush=True)
        results.append(await one_setting(args, fairness))
    report(args, results)


if __name__ == "__main__":
    asyncio.run(main())
