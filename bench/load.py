"""Many chats at once: one `perdure worker`, one `perdure gateway`, N chats started together.

    .venv/bin/python -m bench.load [--chats 50,150] [--store sqlite|postgres|both]
                                   [--count 30] [--delay-ms 50]

Real processes, each its own: a Temporal dev server on a SQLite file, the fake provider
(`python -m tests.fakeprovider`), `perdure worker`, `perdure gateway`, and this process, the
load generator, whose own CPU time is reported with the others' so the figures read honestly.
Each run starts a fresh cluster and store, runs one warm-up chat, then starts N chats at the
same instant; every answer is `@count 30 @delay 50`: 30 tokens at 20 tokens/s. Per run:

- answered exactly: the stream and the stored answer are `1 … 30`, one `start`, event ids
  without gap or duplicate, `[DONE]`, the turn completed;
- corrupted: the text differs from `1 … 30` (stream or store), chunks are duplicated or
  missing, or there is a second `start`;
- errors: no complete answer (HTTP error, timeout, a broken stream, an `error`/`abort` chunk);
- time to first token (`POST` sent → first text delta) p50/p95, and the wall time of the run.
"""

import argparse
import asyncio
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench._support import CpuMeter, RemoteFakeProvider, stats
from tests.cluster import CountingTurn, running_cluster, stored_answer_problems
from tests.databases import database_url, postgres_available

CHAT_TIMEOUT = 180.0


@dataclass
class LoadRun:
    store: str
    chats: int
    exact: int = 0
    corrupted: int = 0
    errors: int = 0
    recovered: int = 0
    """Answers that saw a recovery notice (a retried model step)."""
    ttft: list[float] = field(default_factory=list)
    wall: float = 0.0
    cpu: str = ""
    examples: Counter[str] = field(default_factory=Counter)
    """What went wrong, by kind, for the report."""


async def one_run(store: str, chats: int, count: int, delay_ms: int) -> LoadRun:
    result = LoadRun(store=store, chats=chats)
    with TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with RemoteFakeProvider(workdir) as fake, database_url(store, workdir) as url:
            async with running_cluster(workdir, fake, url) as cluster:
                async with cluster.temporal() as temporal:
                    worker = cluster.worker()
                    gateway_url = await cluster.gateway()
                    await cluster.wait_polling(worker)
                    pids = {
                        "worker": worker.pid,
                        "gateway": cluster.last_gateway.pid,
                        "fake provider": fake.pid,
                    }
                    if isinstance(temporal, subprocess.Popen):
                        pids["temporal"] = temporal.pid
                    meter = CpuMeter(pids)
                    warm_up = CountingTurn(f"warm-up-{uuid.uuid4().hex[:6]}", count, delay_ms)
                    tag = uuid.uuid4().hex[:6]
                    turns = [CountingTurn(f"load-{tag}-{n}", count, delay_ms) for n in range(chats)]
                    limits = httpx.Limits(max_connections=chats + 10)
                    timeout = httpx.Timeout(CHAT_TIMEOUT, connect=30)
                    async with httpx.AsyncClient(
                        base_url=gateway_url, timeout=timeout, limits=limits
                    ) as http:
                        await warm_up.run(http, CHAT_TIMEOUT)  # the first turn's imports
                        meter.start()
                        started = time.monotonic()
                        await asyncio.gather(*(turn.run(http, CHAT_TIMEOUT) for turn in turns))
                        result.wall = time.monotonic() - started
                        meter.stop()
                        judging = asyncio.Semaphore(20)

                        async def judged(turn: CountingTurn) -> None:
                            async with judging:
                                await judge(http, turn, result)

                        await asyncio.gather(*(judged(turn) for turn in turns))
                    result.cpu = meter.summary(result.wall)
    return result


async def judge(http: httpx.AsyncClient, turn: CountingTurn, result: LoadRun) -> None:
    errors = turn.errors()
    corruption = turn.corruption()
    if not errors:
        try:
            corruption += await stored_answer_problems(http, turn)
        except httpx.HTTPError as error:
            errors.append(f"reading the stored answer: {error}")
    if corruption:
        result.corrupted += 1
        result.examples.update(_kind(problem) for problem in corruption)
    elif errors:
        result.errors += 1
        result.examples.update(_kind(problem) for problem in errors)
    else:
        result.exact += 1
    if turn.recoveries():
        result.recovered += 1
    first = turn.first_token_seconds()
    if first is not None:
        result.ttft.append(first * 1000)


def _kind(problem: str) -> str:
    """A problem without its particulars, to count alike ones together."""
    return problem.split(":", 1)[0]


def table(runs: list[LoadRun]) -> list[str]:
    lines = [
        "| store | chats | answered exactly | corrupted | errors | recovered "
        "| TTFT (ms) p50 | p95 | max | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.store} | {run.chats} | {run.exact} | **{run.corrupted}** | {run.errors} "
            f"| {run.recovered} | {stats(run.ttft, 0)} | {run.wall:.1f} |"
        )
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", default="50,150", help="comma-separated chat counts")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--count", type=int, default=30, help="tokens per answer")
    parser.add_argument("--delay-ms", type=int, default=50, help="ms between tokens")
    args = parser.parse_args()
    counts = [int(n) for n in args.chats.split(",") if n.strip()]
    stores = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    if "postgres" in stores and (reason := postgres_available()) is not None:
        if args.store == "postgres":
            parser.error(reason)
        print(f"skipping postgres: {reason}")
        stores.remove("postgres")
    runs: list[LoadRun] = []
    for store in stores:
        for chats in counts:
            run = await one_run(store, chats, args.count, args.delay_ms)
            runs.append(run)
            print(
                f"{store}, {chats} chats: {run.exact} exact, {run.corrupted} corrupted, "
                f"{run.errors} errors, {run.recovered} recovered, wall {run.wall:.1f} s",
                flush=True,
            )
            print(f"  {run.cpu}", flush=True)
            if run.examples:
                print(f"  problems: {dict(run.examples.most_common(8))}", flush=True)
    print()
    print(
        f"each chat: @count {args.count} @delay {args.delay_ms} "
        f"({1000 / args.delay_ms:g} tokens/s); all chats of a run started at once"
    )
    print("\n".join(table(runs)))
    for run in runs:
        print(f"{run.store}, {run.chats} chats: {run.cpu}")


if __name__ == "__main__":
    asyncio.run(main())
