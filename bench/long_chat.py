"""A long chat: does a turn cost the same at turn 2,000 as at turn 1?

    .venv/bin/python -m bench.long_chat [--turns 2000] [--output-kb 1024] [--modes split-sqlite]

Every turn is a submission (`POST /v1/sessions/{id}/submissions`) whose model calls a tool that
returns `--output-kb` KB, then answers; its stream is read by the submission's id. Measured:
- submission accept latency (the POST's answer), p50/p95 over all turns;
- time to first token (POST → first text delta of the answer) over the first and last 10 turns;
- the turn workflow's Temporal history size (bytes) at the first and the last turn;
- the model request's size (bytes the fake provider received) at the first and last turn:
  compaction (agent `long-chat`) keeps it bounded;
- reading the newest page of the history (`GET /api/chat/{id}/messages?limit=20`) after each of
  the first and last turns.
Real processes: `perdure worker` + `perdure gateway`, a Temporal dev server, the fake provider.
"""

import argparse
import asyncio
import json
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from temporalio.client import Client

from bench.latency import percentile
from bench.split import split_stack
from perdure.domain.names import turn_workflow_id
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.server import FakeProvider

EDGE = 10
"""Turns averaged at each end of the chat."""
PAGE = 20
"""Messages in a history page, as a chat UI would load them."""


@dataclass
class Turn:
    accept_ms: float
    ttft_ms: float
    history_bytes: int
    request_bytes: int
    page_ms: float | None = None
    """`GET …/messages?limit=PAGE` after the turn (measured at both ends of the chat only)."""


@dataclass
class Run:
    turns: list[Turn] = field(default_factory=list)
    fresh_first: list[Turn] = field(default_factory=list)
    """Interleaved at the end: the first turn of a new chat,"""
    fresh_second: list[Turn] = field(default_factory=list)
    """its second turn (the model request as large as the long chat's: one earlier output),"""
    long_more: list[Turn] = field(default_factory=list)
    """and one more turn of the long chat, so that both ends meet the same machine load."""


async def one_turn(
    http: httpx.AsyncClient, temporal: Client, fake: FakeProvider, session: str, n: int, kb: int
) -> Turn:
    text = f'@tool blob {{"kb": {kb}}} turn {n} {session}'
    body = {
        "agent": "long-chat",
        "messages": [{"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }
    posted = time.monotonic()
    accepted = await http.post(f"/v1/sessions/{session}/submissions", json=body)
    accept_ms = (time.monotonic() - posted) * 1000
    accepted.raise_for_status()
    submission = accepted.json()["submissionId"]
    first: float | None = None
    async with http.stream(
        "GET", f"/v1/sessions/{session}/submissions/{submission}/stream"
    ) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: {") and '"text-delta"' in line:
                first = time.monotonic()
    handle = temporal.get_workflow_handle(turn_workflow_id(submission))
    for _ in range(200):  # the stream ends at the closing chunk, a moment before the workflow
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            break
        await asyncio.sleep(0.01)
    info = description.raw_description.workflow_execution_info
    requests = fake.requests_for(text)
    fake.state.forget_requests()  # megabytes per turn: thousands of turns would fill memory
    return Turn(
        accept_ms=accept_ms,
        ttft_ms=((first or time.monotonic()) - posted) * 1000,
        history_bytes=info.history_size_bytes,
        request_bytes=max(len(json.dumps(r.body)) for r in requests),
    )


async def page_read_ms(http: httpx.AsyncClient, session: str) -> float:
    started = time.monotonic()
    page = await http.get(f"/api/chat/{session}/messages", params={"limit": PAGE})
    page.raise_for_status()
    return (time.monotonic() - started) * 1000


async def run_mode(
    fake: FakeProvider, workdir: Path, backend: str, turns: int, kb: int
) -> list[str]:
    run = Run()
    with database_url(backend, workdir) as url:
        async with (
            split_stack(fake, workdir, url, name=backend) as stack,
            httpx.AsyncClient(base_url=stack.url, timeout=120) as http,
        ):
            temporal = await Client.connect(stack.temporal_address)
            session = f"long-{uuid.uuid4().hex[:10]}"
            for n in range(turns):
                turn = await one_turn(http, temporal, fake, session, n, kb)
                if PAGE // 2 <= n < PAGE // 2 + EDGE or n >= turns - EDGE:  # full pages
                    turn.page_ms = await page_read_ms(http, session)
                run.turns.append(turn)
                if (n + 1) % max(1, turns // 10) == 0:
                    recent = [t.ttft_ms for t in run.turns[-max(1, turns // 10) :]]
                    print(
                        f"  {backend}: {n + 1}/{turns} turns, TTFT median of the last "
                        f"{len(recent)}: {statistics.median(recent):.0f} ms",
                        flush=True,
                    )
            for k in range(EDGE):
                fresh = f"fresh-{uuid.uuid4().hex[:10]}"
                run.fresh_first.append(await one_turn(http, temporal, fake, fresh, 0, kb))
                run.fresh_second.append(await one_turn(http, temporal, fake, fresh, 1, kb))
                run.long_more.append(await one_turn(http, temporal, fake, session, turns + k, kb))
    return _rows(f"split-{backend}", run)


def _rows(mode: str, run: Run) -> list[str]:
    first, last = run.turns[:EDGE], run.turns[-EDGE:]
    full_pages = run.turns[PAGE // 2 : PAGE // 2 + EDGE]
    accept = [t.accept_ms for t in run.turns]

    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.0f}"

    return [
        f"| {mode} | submission accept (ms) p50 / p95 | {percentile(accept, 50):.1f} / "
        f"{percentile(accept, 95):.1f} | |",
        f"| {mode} | TTFT (ms), median of {EDGE} | {median([t.ttft_ms for t in first])} | "
        f"{median([t.ttft_ms for t in last])} |",
        f"| {mode} | TTFT (ms), interleaved at the end: new chat's turn 1 / its turn 2 · "
        f"the long chat's next turns | {median([t.ttft_ms for t in run.fresh_first])} / "
        f"{median([t.ttft_ms for t in run.fresh_second])} | "
        f"{median([t.ttft_ms for t in run.long_more])} |",
        f"| {mode} | history page of {PAGE} (ms), median of {EDGE} (turns "
        f"{PAGE // 2 + 1}-{PAGE // 2 + EDGE} / last) | "
        f"{median([t.page_ms or 0.0 for t in full_pages])} | "
        f"{median([t.page_ms or 0.0 for t in last])} |",
        f"| {mode} | Temporal history (bytes) | {run.turns[0].history_bytes} | "
        f"{run.turns[-1].history_bytes} |",
        f"| {mode} | model request (bytes) | {run.turns[0].request_bytes} | "
        f"{run.turns[-1].request_bytes} |",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--output-kb", type=int, default=1024)
    parser.add_argument("--modes", default="split-sqlite,split-postgres")
    args = parser.parse_args()
    rows = [
        f"| mode | metric | first turns | last turns (of {args.turns}) |",
        "|---|---|---|---|",
    ]
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            backend = mode.removeprefix("split-")
            if backend == "postgres" and postgres_available() is not None:
                print(f"skipping {mode}: {postgres_available()}")
                continue
            for row in await run_mode(fake, Path(tmp), backend, args.turns, args.output_kb):
                rows.append(row)
                print(row, flush=True)
    print()
    print(f"{args.turns} turns in one session, each with a {args.output_kb} KB tool output.")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
