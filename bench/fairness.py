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
`finish`. The issue's target: B's p50 / p95 within 2× of B alone.
"""

import argparse
import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench._support import SERVED, CpuMeter, RemoteFakeProvider, p50_p95
from bench.latency import percentile
from perdure.runtime.temporal_dev import FAIRNESS_SETTING, DevServerConfig
from perdure.testing.chat_client import counting
from perdure.testing.cluster import CountingTurn, running_cluster
from perdure.testing.databases import database_url

KEYS = {"tenant-a": "bench-key-a", "tenant-b": "bench-key-b"}


@dataclass
class Phase:
    """One tenant's chats of one phase."""

    turns: list[CountingTurn]

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
                    pids = {"worker": worker.pid, "gateway": cluster.last_gateway.pid}
                    if hasattr(temporal, "pid"):
                        pids["temporal"] = temporal.pid
                    await measure(args, gateway, result, CpuMeter(pids))
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


def report(args: argparse.Namespace, results: list[SettingResult]) -> None:
    print(
        f"\n{args.burst} chats of tenant A at once, {args.chats} of tenant B {args.after_ms} ms "
        f"later ({args.store}; answers of {args.count} tokens at {1000 // args.delay_ms}/s)\n"
    )
    print(
        "| fairness | B alone TTFT ms p50 \\| p95 | B beside A's burst p50 \\| p95 | ratio "
        "p50 \\| p95 | A's burst p50 \\| p95 | exact (A, B) | wall s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        assert r.b_alone and r.b_beside and r.a_burst
        alone, beside = r.b_alone.ttft_ms, r.b_beside.ttft_ms
        ratio = "– \\| –"
        if alone and beside:
            ratio = (
                f"×{percentile(beside, 50) / percentile(alone, 50):.1f} \\| "
                f"×{percentile(beside, 95) / percentile(alone, 95):.1f}"
            )
        print(
            f"| {'on' if r.fairness else 'off'} | {p50_p95(alone, 0)} | {p50_p95(beside, 0)} | "
            f"{ratio} | {p50_p95(r.a_burst.ttft_ms, 0)} | "
            f"{r.a_burst.exact}/{len(r.a_burst.turns)}, {r.b_beside.exact}/{len(r.b_beside.turns)}"
            f" | {r.wall:.1f} |"
        )
    for r in results:
        print(f"\nfairness {'on' if r.fairness else 'off'}: {r.cpu}")


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
