"""Tool rounds: from one provider request of a turn to the next, when the tool in between
returns at once.

    .venv/bin/python -m bench.tool_rounds [--turns 5] [--calls 20] [--arrangements split,node]
                                          [--agents long-tool-loop,long-tool-loop-activities]
                                          [--store sqlite|postgres]

Real processes: a Temporal dev server and either a `perdure worker` and a `perdure gateway`
(`split`) or one `perdure serve` (`node`), the store, the fake provider in this process. A turn
of each agent of `perdure.testing.agents.chat` named in `--agents` is scripted with `--calls` lines `@tool wait {"seconds": 0}` and
`@delay 1` (1 ms a chunk): the model calls one tool per request, the tool answers at once, and
after the last call the model answers. `long-tool-loop` (up to 100 steps) runs the calls in its model
step (tool rounds, docs/architecture.md); `long-tool-loop-activities` (`step_tool_rounds = 0`)
runs each as its own Temporal activity, between two workflow tasks. The agents' turns alternate; the first turn of each agent
warms it up and is not counted.

Per arrangement, over every round of every turn (a round: a provider request that called the
tool, to the next request of the same turn):
- round: request start → next request start, p50 / p90 (the provider's own part included);
- orchestration: the request's last byte written by the fake → the next request's start,
  p50 / p90: what Perdure spends between two model requests;
- early / late rounds: the orchestration p50 of the first and of the second half of a turn's
  rounds (a cost that switches on during a turn shows here);
- history events per round: the turn's Temporal history length divided by its rounds.
"""

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from temporalio.client import Client

from bench.latency import percentile
from bench.split import split_stack
from perdure.domain.names import turn_workflow_id
from perdure.testing.chat_client import chat_body, read_stream, user_message
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.fakeprovider.state import RecordedRequest

ARRANGEMENTS = {"split": False, "node": True}
"""Arrangement → whether it is one `perdure serve` process."""


@dataclass
class Rounds:
    round_ms: list[float] = field(default_factory=list)
    orchestration_ms: list[float] = field(default_factory=list)
    early_ms: list[float] = field(default_factory=list)
    late_ms: list[float] = field(default_factory=list)
    events_per_round: list[float] = field(default_factory=list)


def script(calls: int, tag: str) -> str:
    lines = ['@tool wait {"seconds": 0}'] * calls
    return "\n".join([*lines, f"@delay 1 {tag}"])


def answer(calls: int) -> str:
    """What the fake model answers once every call has returned (its script)."""
    return " ".join(["Tool wait returned: waited 0.0 s"] * calls)


def turn_rounds(requests: list[RecordedRequest]) -> tuple[list[float], list[float]]:
    """Each round's request start → next start, and last byte → next start (ms)."""
    whole, between = [], []
    for request, following in zip(requests, requests[1:], strict=False):
        ended = request.delta_times[-1] if request.delta_times else request.started_at
        whole.append((following.started_at - request.started_at) * 1000)
        between.append((following.started_at - ended) * 1000)
    return whole, between


async def history_events(client: Client, submission_id: str) -> int:
    history = await client.get_workflow_handle(turn_workflow_id(submission_id)).fetch_history()
    return len(history.events)


async def one_turn(
    http: httpx.AsyncClient,
    fake: FakeProvider,
    client: Client,
    calls: int,
    agent: str,
    into: Rounds | None,
) -> None:
    tag = f"rounds-{uuid.uuid4().hex[:10]}"
    text = script(calls, tag)
    body = chat_body(f"bench-{tag}", user_message(text), agent=agent)
    streamed = await read_stream(http, "POST", "/api/chat", json=body)
    assert streamed.status == 200 and streamed.done, streamed.chunks
    assert streamed.text() == answer(calls), streamed.text()
    requests = sorted(fake.requests_for(text), key=lambda request: request.started_at)
    assert len(requests) == calls + 1, f"{len(requests)} provider requests for {calls} calls"
    if into is None:
        return
    whole, between = turn_rounds(requests)
    into.round_ms += whole
    into.orchestration_ms += between
    half = len(between) // 2
    into.early_ms += between[:half]
    into.late_ms += between[half:]
    events = await history_events(client, streamed.headers["x-perdure-submission-id"])
    into.events_per_round.append(events / calls)


@asynccontextmanager
async def arrangement(
    fake: FakeProvider, workdir: Path, store: str, name: str
) -> AsyncIterator[tuple[str, Client]]:
    with database_url(store, workdir) as url:
        async with split_stack(
            fake, workdir, url, name=f"{name}-{store}", node=ARRANGEMENTS[name]
        ) as stack:
            yield stack.url, await Client.connect(stack.temporal_address)


def p50_p90(values: list[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 90):.1f}"


def row(name: str, agent: str, store: str, rounds: Rounds) -> str:
    return (
        f"| {name} | {agent} | {store} | {len(rounds.round_ms)} | {p50_p90(rounds.round_ms)} | "
        f"{p50_p90(rounds.orchestration_ms)} | {percentile(rounds.early_ms, 50):.1f} / "
        f"{percentile(rounds.late_ms, 50):.1f} | "
        f"{sum(rounds.events_per_round) / len(rounds.events_per_round):.1f} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_rounds", description=__doc__)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--arrangements", default="split,node")
    parser.add_argument("--agents", default="long-tool-loop,long-tool-loop-activities")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    names = [name.strip() for name in args.arrangements.split(",") if name.strip()]
    agents = [agent.strip() for agent in args.agents.split(",") if agent.strip()]
    unknown = sorted(set(names) - set(ARRANGEMENTS))
    if unknown or not agents or args.turns < 1 or args.calls < 2:
        parser.error(
            f"arrangements are {', '.join(ARRANGEMENTS)} (unknown: {', '.join(unknown)}); "
            "at least one agent; --turns ≥ 1, --calls ≥ 2"
        )
    if args.store == "postgres" and (why := postgres_available()) is not None:
        parser.error(f"PostgreSQL: {why}")
    rows = [
        "| arrangement | agent | store | rounds | round (ms) p50 / p90 | orchestration (ms) p50 / p90 "
        "| early / late half p50 (ms) | history events per round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with FakeProvider() as fake, TemporaryDirectory() as tmp:
        for name in names:
            workdir = Path(tmp) / name
            workdir.mkdir()
            measured = {agent: Rounds() for agent in agents}
            async with (
                arrangement(fake, workdir, args.store, name) as (url, client),
                httpx.AsyncClient(base_url=url, timeout=120) as http,
            ):
                for agent in agents:
                    await one_turn(http, fake, client, args.calls, agent, None)
                for _ in range(args.turns):
                    for agent, rounds in measured.items():
                        await one_turn(http, fake, client, args.calls, agent, rounds)
            for agent, rounds in measured.items():
                rows.append(row(name, agent, args.store, rounds))
                print(rows[-1], flush=True)
    print()
    print(json.dumps({"turns": args.turns, "calls": args.calls, "agents": agents}))
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
