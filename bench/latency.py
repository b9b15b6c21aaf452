"""Time to first token through the gateway, and relay latency, on this machine.

    .venv/bin/python -m bench.latency [--turns 100] [--provider-ttft-ms 0]
        [--modes dev,split-sqlite,split-postgres,node-sqlite,node-postgres]

- TTFT overhead: from `POST /api/chat` to the first text chunk at the client, minus the fake
  provider's own time to first token (request received → first delta written). With a head
  start the provider is asked before the step runs: the overhead is what the client waits
  beyond a direct call, which a head start can take below zero only by a provider TTFT.
- Provider asked: from `POST /api/chat` to the fake provider receiving the request (the same
  monotonic clock, both processes on this machine).
- Relay latency: each text delta written by the provider → the same delta parsed by the SSE
  client.
Every mode runs real processes against a Temporal dev server on a SQLite file: `perdure dev`
(one process, its own Temporal dev server and relay), `perdure worker` + `perdure gateway`
sharing a store (`split-*`), or one `perdure serve` (`node-*`). `-relay` adds a `perdure relay`
that every process uses (`split-relay-sqlite`); `-no-head-start` sets `PERDURE_HEAD_START=false`
(`dev-no-head-start`, `split-relay-no-head-start-sqlite`): the same arrangement side by side.
`--provider-ttft-ms` makes the fake wait that long before its first delta (`@ttft`), as a real
model does: a head start overlaps it with the workflow's start.
"""

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench.delta_matching import covering_events
from bench.split import split_stack
from perdure.testing.chat_client import counting
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.script import words
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.processes import PerdureProcess, wait_healthy
from perdure.testing.stack import free_port

DELTAS_PER_TURN = 20
DELAY_MS = 5
WARM_UP_TURNS = 5


@dataclass
class Samples:
    ttft_overhead_ms: list[float] = field(default_factory=list)
    ttft_total_ms: list[float] = field(default_factory=list)
    relay_ms: list[float] = field(default_factory=list)
    asked_ms: list[float] = field(default_factory=list)
    """`POST` sent → the provider's request received: what a head start shortens."""


QUANTILES = (50, 90, 95, 99)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def one_turn(
    http: httpx.AsyncClient, fake: FakeProvider, samples: Samples | None, provider_ttft_ms: int
) -> None:
    ttft = f"@ttft {provider_ttft_ms} " if provider_ttft_ms else ""
    text = f"{ttft}@count {DELTAS_PER_TURN} @delay {DELAY_MS} bench-{uuid.uuid4().hex[:10]}"
    body = {
        "id": f"bench-{uuid.uuid4().hex[:12]}",
        "messages": [
            {"id": uuid.uuid4().hex[:16], "role": "user", "parts": [{"type": "text", "text": text}]}
        ],
    }
    received: list[tuple[str, float]] = []
    posted = time.monotonic()
    async with http.stream("POST", "/api/chat", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk["type"] == "text-delta":
                received.append((chunk["delta"], time.monotonic()))
    if samples is None:
        return
    (request,) = fake.requests_for(text)
    assert request.first_delta_at is not None
    provider_ttft = request.first_delta_at - request.started_at
    first_at = received[0][1]
    samples.ttft_total_ms.append((first_at - posted) * 1000)
    samples.asked_ms.append((request.started_at - posted) * 1000)
    samples.ttft_overhead_ms.append((first_at - posted - provider_ttft) * 1000)
    written = words(counting(DELTAS_PER_TURN))
    covering = covering_events([delta for delta, _ in received], written)
    samples.relay_ms.extend(
        (received[index][1] - sent) * 1000
        for index, sent in zip(covering, request.delta_times, strict=True)
    )


async def measure(url: str, fake: FakeProvider, turns: int, provider_ttft_ms: int) -> Samples:
    samples = Samples()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for _ in range(WARM_UP_TURNS):
            await one_turn(http, fake, None, provider_ttft_ms)
        for _ in range(turns):
            await one_turn(http, fake, samples, provider_ttft_ms)
    return samples


@dataclass(frozen=True)
class Mode:
    """`dev`, or `<split|node>[-relay]-<sqlite|postgres>`, either with `-no-head-start`."""

    name: str

    @property
    def shape(self) -> str:
        return self.name.split("-", 1)[0]

    @property
    def backend(self) -> str:
        return self.name.rsplit("-", 1)[-1]

    @property
    def relay(self) -> bool:
        return "-relay" in self.name

    @property
    def env(self) -> dict[str, str]:
        return {"PERDURE_HEAD_START": "false"} if "-no-head-start" in self.name else {}


@asynccontextmanager
async def dev_mode(fake: FakeProvider, workdir: Path, mode: Mode) -> AsyncIterator[str]:
    port = free_port()
    env = {
        **mode.env,
        **fake.env(),
        "PERDURE_MODEL": "openai:gpt-bench",
        "PERDURE_PORT": str(port),
        "PERDURE_DATA_DIR": str(workdir / mode.name),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "PERDURE_TEMPORAL_UI_PORT": str(free_port()),
    }
    dev = PerdureProcess("dev", env, workdir).start()
    try:
        await wait_healthy(f"http://127.0.0.1:{port}", dev, timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        dev.stop()


@asynccontextmanager
async def split_mode(fake: FakeProvider, workdir: Path, mode: Mode) -> AsyncIterator[str]:
    with database_url(mode.backend, workdir) as url:
        async with split_stack(
            fake,
            workdir,
            url,
            name=mode.name,
            agents=None,
            node=mode.shape == "node",
            relay=mode.relay,
            extra_env=mode.env,
        ) as stack:
            yield stack.url


def report(name: str, samples: Samples) -> str:
    def row(label: str, values: list[float]) -> str:
        quantiles = " | ".join(f"{percentile(values, q):.1f}" for q in QUANTILES)
        return f"| {name} | {label} | {len(values)} | {quantiles} |"

    return "\n".join(
        [
            row("TTFT overhead (ms)", samples.ttft_overhead_ms),
            row("TTFT total (ms)", samples.ttft_total_ms),
            row("provider asked (ms)", samples.asked_ms),
            row("relay latency (ms)", samples.relay_ms),
        ]
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--provider-ttft-ms", type=int, default=0)
    parser.add_argument(
        "--modes", default="dev,split-sqlite,split-postgres,node-sqlite,node-postgres"
    )
    args = parser.parse_args()
    modes = [Mode(m.strip()) for m in args.modes.split(",") if m.strip()]
    rows = [
        "| mode | metric | n | " + " | ".join(f"p{q}" for q in QUANTILES) + " |",
        "|---|---|---|" + "---|" * len(QUANTILES),
    ]
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for mode in modes:
            if mode.backend == "postgres" and postgres_available() is not None:
                print(f"skipping {mode.name}: {postgres_available()}")
                continue
            context = (
                dev_mode(fake, workdir, mode)
                if mode.shape == "dev"
                else split_mode(fake, workdir, mode)
            )
            async with context as url:
                samples = await measure(url, fake, args.turns, args.provider_ttft_ms)
            rows.append(report(mode.name, samples))
            print(rows[-1], flush=True)
    print()
    print(
        f"{args.turns} turns per mode after {WARM_UP_TURNS} warm-up turns; {DELTAS_PER_TURN} "
        f"deltas per turn, {DELAY_MS} ms apart; the provider's first delta after "
        f"{args.provider_ttft_ms} ms (@ttft)."
    )
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
