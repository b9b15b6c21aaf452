"""Recovery when a worker dies mid-stream (SIGKILL), per provider API, and answers during a
rolling restart of every worker (SIGTERM).

    .venv/bin/python -m bench.recovery [--runs 5] [--apis openai,openai-responses,anthropic]
                                       [--rolling-turns 12] [--grace 2] [--store sqlite|postgres]
                                       [--relay]

Real processes: a Temporal dev server on a SQLite file, two `perdure worker`s on one task
queue, one `perdure gateway`, the store (SQLite by default), the fake provider in this process.

Kill runs, per provider API (`openai:` Chat Completions, `openai-responses:` in background
mode, `anthropic:` Messages): a turn streams `@count 400 @delay 10` through the gateway; after
50 tokens the worker running its model step is SIGKILLed and a replacement started at once.
- Recovery time: SIGKILL → the first continued text delta at the client (the first text delta
  after the transient `data-recovery` chunk). The other worker takes the step over once the
  heartbeat timeout has passed.
- Tokens streamed twice: the deltas the fake provider wrote for the turn minus the deltas of
  the final answer, which must be exactly `1 … 400`. Chat Completions and Anthropic regenerate
  them (the killed attempt's unlogged tokens, plus any overlap the continuation repeats);
  OpenAI Responses re-sends them from the stored response (`starting_after`), so they are
  generated once.
- Continued by: the provider requests made after the kill (a new generation, or a re-attach);
  provider requests: all the turn's requests (1: nothing was asked twice).

`--relay` runs a `perdure relay` process and points every worker at it (docs/relay.md): Chat
Completions and Anthropic steps then re-attach to the relay's copy of their provider stream.
It also reports the relay's CPU per 1,000 streamed chunks and its memory per held stream.
The APIs `anthropic-4.6` and `anthropic-4.7` run today's Claude models (no prefill).

Rolling restart: `--rolling-turns` answers (`@count 600 @delay 50`, 30 s at 20 tokens/s, the
three APIs in turn) stream while each worker in turn gets SIGTERM, its replacement is started
and polls, then the next; each stopping worker gives its activities `--grace` seconds and hands
the rest over. A broken answer is one whose stream or stored message is not exactly the count,
with one `start` and event ids without gap or duplicate, ending completed (target: 0).
"""

import argparse
import asyncio
import re
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench._support import SERVED, cpu_seconds, stats
from perdure.domain.names import MODEL_STEP_ACTIVITY, turn_workflow_id
from perdure.testing.cluster import (
    Cluster,
    CountingTurn,
    rolling_restart,
    running_cluster,
    stored_answer_problems,
    wait_until,
)
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.processes import PerdureProcess
from workflows._policies import HEARTBEAT_TIMEOUT

COUNT = 400
DELAY_MS = 10
KILL_AFTER = 50
ROLLING_COUNT = 600
ROLLING_DELAY_MS = 50
APIS: dict[str, str | None] = {
    "openai": None,  # the default agent, on PERDURE_MODEL=openai:gpt-fake
    "openai-responses": "responses",
    "anthropic": "anthropic",
    "anthropic-4.6": "claude-4-6",
    "anthropic-4.7": "claude-4-7",
}
"""Provider API → the agent of `perdure.testing.agents.chat` that uses it (`anthropic` is
claude-haiku-4-5, of the prefill era)."""


@dataclass(frozen=True)
class KillRun:
    api: str
    seconds: float
    """SIGKILL → first continued text delta at the client."""
    attempt_started: float
    """SIGKILL → the retried model step began on a live worker (its recovery event)."""
    streamed_twice: int
    continued_by: str
    """The provider routes requested after the kill."""
    finished: float
    """SIGKILL → the stream's last chunk."""
    requests: int
    """The turn's provider requests, all attempts."""


@dataclass(frozen=True)
class RollingRun:
    turns: int
    broken: dict[str, list[str]]
    handed_over: int
    continued: int
    """Answers that saw at least one recovery (a hand-over) and went on."""
    longest_pause: list[float]
    """Per answer: the longest wait between two text deltas at the client (s)."""
    restart_seconds: float
    """First SIGTERM → the last replacement polling."""
    exit_codes: list[int]


async def worker_running(cluster: Cluster, turn: CountingTurn) -> PerdureProcess:
    """The worker process running the turn's model step (from the activity's last worker)."""
    submission = next(
        chunk["messageMetadata"]["submissionId"]
        for _, chunk in turn.stream.events
        if chunk["type"] == "start"
    )
    client = await cluster.client()
    handle = client.get_workflow_handle(turn_workflow_id(submission))
    for _ in range(100):
        description = await handle.describe()
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == MODEL_STEP_ACTIVITY and pending.last_worker_identity:
                pid = int(pending.last_worker_identity.split("@", 1)[0])
                for process in cluster.processes:
                    if process.command == "worker" and process.pid == pid:
                        return process
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker runs the model step of {submission}")


async def kill_run(
    cluster: Cluster, url: str, fake: FakeProvider, api: str, workers: list[PerdureProcess]
) -> KillRun:
    turn = CountingTurn(f"kill-{api}-{uuid.uuid4().hex[:8]}", COUNT, DELAY_MS, agent=APIS[api])
    async with httpx.AsyncClient(base_url=url, timeout=90) as http:
        reading = asyncio.create_task(turn.run(http))
        await wait_until(lambda: turn.stream.deltas() >= KILL_AFTER)
        victim = await worker_running(cluster, turn)
        requested_before = len(fake.requests_for(turn.user_text))
        killed_at, killed_wall = time.monotonic(), time.time()
        victim.kill()
        workers.remove(victim)
        workers.append(cluster.worker())
        await asyncio.wait_for(reading, timeout=90)
        problems = turn.errors() + turn.corruption() + await stored_answer_problems(http, turn)
        events = (await http.get(f"/v1/sessions/{turn.session}/events")).json()
    if problems:
        raise AssertionError(f"{api}: the answer is broken: {problems}\n{cluster.logs()}")
    types = [chunk["type"] for _, chunk in turn.stream.events]
    notice = types.index("data-recovery")
    first_continued = next(i for i in range(notice, len(types)) if types[i] == "text-delta")
    detected = next(e for e in events if e["type"] == "chat.recovery.detected")
    routes = [request.route for request in fake.requests_for(turn.user_text)[requested_before:]]
    return KillRun(
        api=api,
        seconds=turn.stream.received_at[first_continued] - killed_at,
        attempt_started=datetime.fromisoformat(detected["created_at"]).timestamp() - killed_wall,
        streamed_twice=fake.deltas_for(turn.user_text) - COUNT,
        continued_by=" + ".join(routes) or "nothing",
        finished=turn.stream.received_at[-1] - killed_at,
        requests=len(fake.requests_for(turn.user_text)),
    )


class RelayCost:
    """The relay process's CPU over the runs, per 1,000 chunks the provider streamed, and what
    it held at the end (streams are kept `keep_seconds` after their end)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.started = cpu_seconds(pid)

    async def lines(self, url: str, fake: FakeProvider) -> list[str]:
        spent = cpu_seconds(self.pid) - self.started
        chunks = fake.state.generated_deltas
        async with httpx.AsyncClient(timeout=10) as http:
            held = (await http.get(f"{url}/stats")).json()
        per_stream = held["bytes"] / held["streams"] if held["streams"] else 0.0
        return [
            "",
            "| relay CPU per 1,000 provider text deltas | streams held | bytes held | per stream "
            "| cap (all streams) | cap (one stream) |",
            "|---|---|---|---|---|---|",
            f"| {1000 * spent / max(chunks, 1) * 1000:.1f} ms | {held['streams']} "
            f"| {held['bytes']:,} | {per_stream:,.0f} B "
            f"| {held['limits']['max_total_bytes']:,} | {held['limits']['max_stream_bytes']:,} |",
        ]


_HANDED_OVER = re.compile(r"(\d+) activities handed over")


def longest_pause(turn: CountingTurn) -> float:
    times = [
        at
        for (_, chunk), at in zip(turn.stream.events, turn.stream.received_at, strict=True)
        if chunk["type"] == "text-delta"
    ]
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


async def rolling_run(
    cluster: Cluster, url: str, workers: list[PerdureProcess], turns_wanted: int, grace: str
) -> RollingRun:
    tag = uuid.uuid4().hex[:6]
    apis = list(APIS)
    turns = [
        CountingTurn(
            f"rolling-{tag}-{n}", ROLLING_COUNT, ROLLING_DELAY_MS, agent=APIS[apis[n % len(apis)]]
        )
        for n in range(turns_wanted)
    ]
    limits = httpx.Limits(max_connections=turns_wanted + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        reading = [asyncio.create_task(turn.run(http)) for turn in turns]
        await wait_until(lambda: all(turn.stream.deltas() >= 20 for turn in turns), timeout=60)
        old = list(workers)
        started = time.monotonic()
        replacements = await rolling_restart(cluster, old, PERDURE_WORKER_SHUTDOWN_GRACE=grace)
        restart_seconds = time.monotonic() - started
        workers[:] = replacements
        codes = [await worker.wait_exit(60) for worker in old]
        await asyncio.wait_for(asyncio.gather(*reading), timeout=120)
        broken: dict[str, list[str]] = {}
        for turn in turns:
            found = turn.errors() + turn.corruption() + await stored_answer_problems(http, turn)
            if found:
                broken[turn.session] = found
    handed_over = sum(
        int(match.group(1)) for worker in old for match in _HANDED_OVER.finditer(worker.output())
    )
    return RollingRun(
        turns=len(turns),
        broken=broken,
        handed_over=handed_over,
        continued=sum(1 for turn in turns if turn.recoveries()),
        longest_pause=[longest_pause(turn) for turn in turns],
        restart_seconds=restart_seconds,
        exit_codes=codes,
    )


def kill_table(runs: list[KillRun], apis: list[str]) -> list[str]:
    lines = [
        "| API | n | recovery time (s) p50 | p95 | max | retried attempt started (s) p50 "
        "| tokens streamed twice p50 | p95 | max | mean | provider requests max "
        "| continued by |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for api in apis:
        mine = [run for run in runs if run.api == api]
        if not mine:
            continue
        twice = [float(run.streamed_twice) for run in mine]
        started = statistics.median(run.attempt_started for run in mine)
        ways = sorted({run.continued_by for run in mine})
        lines.append(
            f"| `{api}:` | {len(mine)} | {stats([run.seconds for run in mine], 2)} "
            f"| {started:.2f} | {stats(twice, 0)} | {statistics.mean(twice):.2f} "
            f"| {max(run.requests for run in mine)} | {'; '.join(ways)} |"
        )
    return lines


def rolling_lines(run: RollingRun, grace: str) -> list[str]:
    return [
        "| turns | broken answers | activities handed over | answers continued "
        "| longest pause per answer (s) p50 | p95 | max | restart took (s) | exit codes |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {run.turns} | **{len(run.broken)}** | {run.handed_over} | {run.continued} "
        f"| {stats(run.longest_pause, 2)} | {run.restart_seconds:.1f} "
        f"| {', '.join(map(str, run.exit_codes))} |",
        f"grace {grace} s; answers of {ROLLING_COUNT} tokens at {1000 // ROLLING_DELAY_MS}/s",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="kill runs per provider API")
    parser.add_argument("--apis", default=",".join(APIS))
    parser.add_argument("--rolling-turns", type=int, default=12, help="0 skips the restart")
    parser.add_argument("--grace", default="2", help="PERDURE_WORKER_SHUTDOWN_GRACE (s)")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--relay", action="store_true", help="stream through perdure relay")
    args = parser.parse_args()
    apis = [api.strip() for api in args.apis.split(",") if api.strip()]
    unknown = set(apis) - set(APIS)
    if unknown:
        parser.error(f"unknown API {sorted(unknown)}; known: {', '.join(APIS)}")
    if args.store == "postgres" and (reason := postgres_available()) is not None:
        parser.error(reason)
    runs: list[KillRun] = []
    rolling: RollingRun | None = None
    relay_lines: list[str] = []
    grace = {"PERDURE_WORKER_SHUTDOWN_GRACE": args.grace}
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with database_url(args.store, workdir) as store_url:
            async with running_cluster(workdir, fake, store_url, SERVED) as cluster:
                cluster.env.update(grace)
                async with cluster.temporal():
                    relay_cpu: RelayCost | None = None
                    if args.relay:
                        cluster.env.update(await cluster.relay())
                        relay_cpu = RelayCost(cluster.last_relay.pid)
                    workers = [cluster.worker(), cluster.worker()]
                    url = await cluster.gateway()
                    for worker in workers:
                        await cluster.wait_polling(worker)
                    for number in range(1, args.runs + 1):
                        for api in apis:
                            result = await kill_run(cluster, url, fake, api, workers)
                            runs.append(result)
                            print(
                                f"kill {number} {api}: continued after {result.seconds:.2f} s "
                                f"(attempt started after {result.attempt_started:.2f} s, turn "
                                f"ended after {result.finished:.2f} s), {result.streamed_twice} "
                                f"tokens streamed twice, by {result.continued_by}",
                                flush=True,
                            )
                    if relay_cpu is not None:
                        relay_lines = await relay_cpu.lines(cluster.env["PERDURE_RELAY_URL"], fake)
                    if args.rolling_turns > 0:
                        for worker in workers:
                            await cluster.wait_polling(worker)
                        rolling = await rolling_run(
                            cluster, url, workers, args.rolling_turns, args.grace
                        )
                        print(f"rolling restart: {rolling}", flush=True)
    print()
    print(
        f"store {args.store}; heartbeat timeout {HEARTBEAT_TIMEOUT.total_seconds():g} s "
        "(recovery target ≤ timeout + 1 s); "
        f"kill runs: @count {COUNT} @delay {DELAY_MS}, SIGKILL after {KILL_AFTER} tokens"
    )
    if runs:
        print("\n".join(kill_table(runs, apis)))
    if args.relay:
        print("\n".join(relay_lines))
    if rolling is not None:
        print()
        print("\n".join(rolling_lines(rolling, args.grace)))
        for session, problems in rolling.broken.items():
            print(f"broken: {session}: {problems}")


if __name__ == "__main__":
    asyncio.run(main())
