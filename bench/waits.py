"""Parked turns and sub-agents, through the gateway, on this machine.

    .venv/bin/python -m bench.waits [--turns 30] [--modes split-sqlite,split-postgres]

- Approval answer → tool started: from just before `POST /v1/sessions/{id}/approvals/{id}`
  leaves the client to the moment the approved tool's code starts (it writes `time.time()`).
  In between: the answer's transaction, the signal, a workflow task, `perdure.resume_turn`,
  the tool activity's dispatch.
- Sub-agent chunk → parent's client: each text delta the fake provider writes for the child
  turn, to the preliminary tool output of the parent's stream that first contains it.
Real processes: `perdure worker` + `perdure gateway` on one store, a Temporal dev server.
"""

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench.latency import percentile
from bench.split import split_stack
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.server import FakeProvider

CHILD_WORDS = 40
CHILD_DELAY_MS = 25
WARM_UP = 3


def _events(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


async def approval_latency(http: httpx.AsyncClient, runs: Path) -> float:
    session = f"bench-appr-{uuid.uuid4().hex[:12]}"
    label = uuid.uuid4().hex[:12]
    body = {
        "id": session,
        "agent": "approvals",
        "messages": [
            {
                "id": uuid.uuid4().hex[:16],
                "role": "user",
                "parts": [{"type": "text", "text": f'@tool stamp {{"label": "{label}"}}'}],
            }
        ],
    }
    async with http.stream("POST", "/api/chat", json=body) as response:
        lines = [line async for line in response.aiter_lines()]
    request = next(c for c in _events(lines) if c["type"] == "tool-approval-request")
    answered_at = time.time()
    answer = await http.post(
        f"/v1/sessions/{session}/approvals/{request['approvalId']}", json={"approved": True}
    )
    answer.raise_for_status()
    prefix = f"stamp:{label}:"
    for _ in range(1000):
        started = [line for line in runs.read_text().splitlines() if line.startswith(prefix)]
        if started:
            return (float(started[0].removeprefix(prefix)) - answered_at) * 1000
        await asyncio.sleep(0.005)
    raise TimeoutError("the approved tool never started")


async def sub_agent_latencies(http: httpx.AsyncClient, fake: FakeProvider) -> list[float]:
    task = f"@count {CHILD_WORDS} @delay {CHILD_DELAY_MS} bench-{uuid.uuid4().hex[:10]}"
    body = {
        "id": f"bench-sub-{uuid.uuid4().hex[:12]}",
        "agent": "manager",
        "messages": [
            {
                "id": uuid.uuid4().hex[:16],
                "role": "user",
                "parts": [{"type": "text", "text": f"@tool research {json.dumps({'task': task})}"}],
            }
        ],
    }
    arrivals: list[tuple[float, str]] = []
    async with http.stream("POST", "/api/chat", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["type"] == "tool-output-available":  # preliminary, then the final
                    arrivals.append((time.monotonic(), str(chunk["output"])))
    (child,) = fake.requests_for(task)
    latencies: list[float] = []
    seen = 0
    for received, text in arrivals:
        words = len(text.split())
        for index in range(seen, words):  # deltas first visible in this output
            latencies.append((received - child.delta_times[index]) * 1000)
        seen = max(seen, words)
    return latencies


async def run_mode(fake: FakeProvider, workdir: Path, backend: str, turns: int) -> list[str]:
    runs = workdir / f"runs-{backend}.txt"
    runs.touch()
    with database_url(backend, workdir) as url:
        async with (
            split_stack(
                fake,
                workdir,
                url,
                name=backend,
                extra_env={"PERDURE_TEST_TOOL_RUNS": str(runs)},
            ) as stack,
            httpx.AsyncClient(base_url=stack.url, timeout=60) as http,
        ):
            for _ in range(WARM_UP):
                await approval_latency(http, runs)
                await sub_agent_latencies(http, fake)
            approvals = [await approval_latency(http, runs) for _ in range(turns)]
            relayed: list[float] = []
            for _ in range(turns):
                relayed += await sub_agent_latencies(http, fake)
    return [
        f"| split-{backend} | approval answer → tool started (ms) | {len(approvals)} | "
        f"{percentile(approvals, 50):.1f} | {percentile(approvals, 95):.1f} |",
        f"| split-{backend} | sub-agent chunk → parent's client (ms) | {len(relayed)} | "
        f"{percentile(relayed, 50):.1f} | {percentile(relayed, 95):.1f} |",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--modes", default="split-sqlite,split-postgres")
    args = parser.parse_args()
    rows = ["| mode | metric | n | p50 | p95 |", "|---|---|---|---|---|"]
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            backend = mode.removeprefix("split-")
            if backend == "postgres" and postgres_available() is not None:
                print(f"skipping {mode}: {postgres_available()}")
                continue
            for row in await run_mode(fake, Path(tmp), backend, args.turns):
                rows.append(row)
                print(row, flush=True)
    print()
    print(
        f"{args.turns} parked turns and {args.turns} sub-agent turns per mode after {WARM_UP} "
        f"warm-up each; the child answers {CHILD_WORDS} words, {CHILD_DELAY_MS} ms apart."
    )
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
