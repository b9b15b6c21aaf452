"""Recovery after a worker is SIGKILLed mid-stream, with a fresh worker started at once.

    .venv/bin/python -m bench.recovery [--runs 20]

- Recovery time: SIGKILL → the first continued text chunk at the client (the first text delta
  after the transient `data-recovery` chunk), through a live SSE stream on the gateway.
- Tokens generated twice: text deltas the provider streamed for the turn minus the deltas of
  the final answer — what the killed attempt produced but never logged (the in-flight batch).
Real processes: a Temporal dev server on a SQLite file, `perdure worker`, `perdure gateway`,
the fake provider (Chat Completions, prefill continuation) in this process.
"""

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from bench.latency import percentile
from tests.cluster import Cluster, LiveStream, running_cluster, wait_until
from tests.e2e.chat_client import chat_body, counting, user_message
from tests.fakeprovider.server import FakeProvider
from workflows._policies import HEARTBEAT_TIMEOUT

COUNT = 400


@dataclass(frozen=True)
class Recovery:
    seconds: float
    """SIGKILL → first continued text delta at the client."""
    attempt_started: float
    """SIGKILL → the retried model step began on the fresh worker (its recovery event)."""
    generated_twice: int
    finished: float
    """SIGKILL → the stream's last chunk (the turn's end, after the rest of the answer)."""


async def one_recovery(cluster: Cluster, url: str, fake: FakeProvider) -> Recovery:
    worker = (
        cluster.processes[-2]
        if cluster.processes[-1].command == "gateway"
        else cluster.processes[-1]
    )
    session = f"bench-{uuid.uuid4().hex[:8]}"
    text = f"@count {COUNT} @delay 10 {session}"
    stream = LiveStream()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async with http.stream(
            "POST", "/api/chat", json=chat_body(session, user_message(text))
        ) as response:
            reader = asyncio.create_task(stream.read(response))
            await wait_until(lambda: stream.deltas() >= 50)
            killed_at = asyncio.get_running_loop().time()
            killed_wall = time.time()
            worker.kill()
            cluster.worker()
            await asyncio.wait_for(reader, timeout=60)
    assert stream.text() == counting(COUNT), "the answer must be exact"
    types = [chunk["type"] for _, chunk in stream.events]
    notice = types.index("data-recovery")
    first_continued = next(i for i in range(notice, len(types)) if types[i] == "text-delta")
    recovery_seconds = stream.received_at[first_continued] - killed_at
    generated_twice = fake.deltas_for(text) - COUNT
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        events = (await http.get(f"/v1/sessions/{session}/events")).json()
    detected = next(e for e in events if e["type"] == "chat.recovery.detected")
    attempt_started = datetime.fromisoformat(detected["created_at"]).timestamp() - killed_wall
    finished = stream.received_at[-1] - killed_at
    return Recovery(recovery_seconds, attempt_started, generated_twice, finished)


def row(label: str, values: list[float], digits: int) -> str:
    p50, p95, top = percentile(values, 50), percentile(values, 95), max(values)
    return f"| {label} | {len(values)} | {p50:.{digits}f} | {p95:.{digits}f} | {top:.{digits}f} |"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    runs: list[Recovery] = []
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        async with running_cluster(workdir, fake, f"sqlite:///{workdir / 'perdure.db'}") as cluster:
            async with cluster.temporal():
                cluster.worker()
                url = await cluster.gateway()
                cluster.processes.append(cluster.processes.pop(-2))  # keep the worker last
                for number in range(1, args.runs + 1):
                    result = await one_recovery(cluster, url, fake)
                    runs.append(result)
                    print(
                        f"run {number}: recovered in {result.seconds:.2f} s (attempt started "
                        f"after {result.attempt_started:.2f} s, turn ended after "
                        f"{result.finished:.2f} s), {result.generated_twice} deltas generated twice",
                        flush=True,
                    )
    twice = [float(r.generated_twice) for r in runs]
    print()
    print(f"heartbeat timeout {HEARTBEAT_TIMEOUT.total_seconds():g} s; target ≤ timeout + 1 s")
    print("| metric | n | p50 | p95 | max |")
    print("|---|---|---|---|---|")
    print(row("recovery time (s)", [r.seconds for r in runs], 2))
    print(
        row("of which: until the retried attempt started (s)", [r.attempt_started for r in runs], 2)
    )
    print(row("deltas generated twice per recovery", twice, 0))
    print(f"mean deltas generated twice: {statistics.mean(twice):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
