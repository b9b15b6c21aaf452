"""Steady load: new chats arriving at a fixed rate, each a long answer, on one worker and one
gateway; the highest rate that keeps time to first token and relay latency within bounds.

    .venv/bin/python -m bench.steady [--rates 0.5,1,2] [--seconds 60] [--count 1500]
                                     [--delay-ms 20] [--store sqlite|postgres|both]
                                     [--shape split|node|both]

Real processes, as `bench.load` runs them (Temporal dev server, fake provider, `perdure
worker`, `perdure gateway`, this process as the load generator), a fresh cluster per rate.
At each rate, chats start at even intervals for `--seconds`; each answer is `@count 1500
@delay 20`: 30 s at 50 tokens/s, so about `rate × 30` answers stream at once once the load is
steady. Per rate: answered exactly, time to first token p50/p95 (`POST` → first text delta),
relay latency p50/p95 (the provider wrote a delta → this process received it, as `bench.load`
measures it), and the CPU seconds of every process. A rate is **sustained** when every answer
is exact, TTFT p95 ≤ 1 s and relay p95 ≤ 100 ms; the highest sustained rate is reported.
"""

import argparse
import asyncio
import itertools
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench._support import p50_p95
from bench.load import (
    LoadRun,
    add_shape_option,
    chosen_shapes,
    chunk_row_times,
    judge,
    load_cluster,
    measure,
    message_id,
)
from perdure.testing.cluster import CountingTurn
from perdure.testing.databases import postgres_available

TTFT_P95_BOUND_MS = 1000.0
RELAY_P95_BOUND_MS = 100.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("inf")
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def one_rate(
    store: str, shape: str, rate: float, seconds: float, count: int, delay_ms: int
) -> tuple[LoadRun, str]:
    chats = max(1, round(rate * seconds))
    result = LoadRun(store=store, chats=chats, shape=shape)
    tag = f"steady-{uuid.uuid4().hex[:6]}-"
    turns = [CountingTurn(f"{tag}{n}", count, delay_ms) for n in range(chats)]
    timeout = httpx.Timeout(count * delay_ms / 1000 + 120, connect=30)
    limits = httpx.Limits(max_connections=chats + 10)
    with TemporaryDirectory() as tmp:
        async with (
            load_cluster(Path(tmp), store, shape) as cluster,
            httpx.AsyncClient(base_url=cluster.gateway_url, timeout=timeout, limits=limits) as http,
        ):
            await CountingTurn(f"warm-{uuid.uuid4().hex[:6]}", 5, 10).run(http)
            cluster.meter.start()
            started = time.monotonic()
            answering = []
            for n, turn in enumerate(turns):
                await asyncio.sleep(max(0.0, started + n / rate - time.monotonic()))
                answering.append(asyncio.create_task(turn.run(http, 600)))
            await asyncio.gather(*answering)
            result.wall = time.monotonic() - started
            cluster.meter.stop()
            observation = await cluster.fake.observe(contains=tag)
            exact = [turn for turn in turns if await judge(http, turn, result)]
            rows = await asyncio.to_thread(
                chunk_row_times, cluster.store_url, [m for t in exact if (m := message_id(t))]
            )
        measure(result, turns, exact, observation, rows)
        return result, cluster.meter.summary(result.wall)


def sustained(run: LoadRun) -> bool:
    return (
        run.exact == run.chats
        and percentile(run.ttft, 95) <= TTFT_P95_BOUND_MS
        and percentile(run.relay, 95) <= RELAY_P95_BOUND_MS
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="0.5,1,2", help="new chats per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--count", type=int, default=1500)
    parser.add_argument("--delay-ms", type=int, default=20)
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="sqlite")
    add_shape_option(parser)
    args = parser.parse_args()
    shapes = chosen_shapes(args.shape)
    stores = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    if "postgres" in stores and (reason := postgres_available()) is not None:
        parser.error(reason)
    rates = [float(rate) for rate in args.rates.split(",")]
    lines = [
        "| store | shape | new chats/s | chats | exact | TTFT (ms) p50 | p95 | relay (ms) p50 "
        "| p95 | sustained | CPU seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    best: dict[tuple[str, str], float] = {}
    for store, shape, rate in itertools.product(stores, shapes, rates):
        run, cpu = await one_rate(store, shape, rate, args.seconds, args.count, args.delay_ms)
        ok = sustained(run)
        if ok:
            best[store, shape] = max(best.get((store, shape), 0.0), rate)
        line = (
            f"| {store} | {shape} | {rate:g} | {run.chats} | {run.exact} "
            f"| {p50_p95(run.ttft, 0)} | {p50_p95(run.relay, 0)} | {'yes' if ok else 'no'} "
            f"| {cpu} |"
        )
        print(line, flush=True)
        lines.append(line)
    print()
    print(
        f"each chat: @count {args.count} @delay {args.delay_ms} "
        f"({1000 // args.delay_ms} tokens/s), chats arriving evenly for {args.seconds:g} s; "
        f"sustained: all exact, TTFT p95 ≤ {TTFT_P95_BOUND_MS:g} ms, "
        f"relay p95 ≤ {RELAY_P95_BOUND_MS:g} ms"
    )
    print("\n".join(lines))
    for store, shape in itertools.product(stores, shapes):
        rate = best.get((store, shape), 0.0)
        print(f"highest sustained rate, {store} {shape}: {rate:g} new chats/s")


if __name__ == "__main__":
    asyncio.run(main())
