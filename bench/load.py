"""Many chats at once: one `perdure worker`, one `perdure gateway`, N chats started together.

    .venv/bin/python -m bench.load [--chats 50,150,300,500] [--store sqlite|postgres|both]
                                   [--shape split|node|both]
                                   [--count 30] [--delay-ms 50] [--timeout 180]

Real processes, each its own: a Temporal dev server on a SQLite file, the fake provider
(`python -m perdure.testing.fakeprovider`), `perdure worker`, `perdure gateway`, and this process, the
load generator, whose own CPU time is reported with the others' so the figures read honestly.
Each run starts a fresh cluster and store, runs one warm-up chat, then starts N chats at the
same instant; every answer is `@count 30 @delay 50`: 30 tokens at 20 tokens/s. Per run:

- answered exactly: the stream and the stored answer are `1 … 30`, one `start`, event ids
  without gap or duplicate, `[DONE]`, the turn completed;
- corrupted: the text differs from `1 … 30` (stream or store), chunks are duplicated or
  missing, or there is a second `start`;
- errors: no complete answer (HTTP error, timeout, a broken stream, an `error`/`abort` chunk);
- time to first token (`POST` sent → first text delta) p50/p95, and the wall time of the run;
- relay latency p50/p95: from the fake provider writing a delta to its socket to this process
  receiving the SSE event that carries it. The fake stamps each delta with `time.monotonic()`
  (read back from its test-only route `GET /_fake/requests`); this process stamps each event
  with `time.monotonic()` too: CLOCK_MONOTONIC is one clock for the whole machine on Linux,
  and every read checks it (the fake's clock must fall inside this process's bracket of the
  read). Deltas are matched to events by position in the text (the counting answer makes this
  exact, even when the worker coalesces deltas), over the exact answers served by one provider
  request. It is split at the chunk row's `created_at` (wall clock, stamped by the worker as it
  writes the row, inside the write transaction; read from the store after the run): provider
  → log row, and log row → client, the relay proper (commit, wake-up, read, send);
- chunks per second end to end: SSE events received over all chats / the span from the first
  to the last (and the same for text deltas alone);
- each answer's wall time (`POST` sent → its last event) against the provider's own (its
  request arriving → its last delta written), and the difference, p50/p95;
- peak memory (`VmHWM`, the kernel's high-water mark of resident memory) of the gateway and
  the worker, each a fresh process for the run.
- CPU seconds of every process over the run, the PostgreSQL server's (all its processes,
  which share the machine) included on that store.
"""

import argparse
import asyncio
import contextlib
import itertools
import shutil
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
from sqlalchemy import create_engine, select
from sqlmodel import col

from bench._support import (
    SERVED,
    CpuMeter,
    Observation,
    ProviderRequest,
    RemoteFakeProvider,
    own_peak_rss_mb,
    p50_p95,
    peak_rss_mb,
    rss_mb,
    stats,
)
from bench.delta_matching import covering_events
from perdure.testing.chat_client import counting
from perdure.testing.cluster import CountingTurn, running_cluster, stored_answer_problems
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.script import words
from storage.tables import ChunkRow
from storage.urls import sync_url

CHAT_TIMEOUT = 180.0
PROGRESS_EVERY = 10.0
"""Seconds between the progress lines of a run, so a long one shows it is alive."""
LOAD_GENERATOR = "load generator (this process)"


@dataclass
class LoadRun:
    store: str
    chats: int
    shape: str = "split"
    """`split`: a `perdure worker` and a `perdure gateway`; `node`: one `perdure serve`."""
    exact: int = 0
    corrupted: int = 0
    errors: int = 0
    recovered: int = 0
    """Answers that saw a recovery notice (a retried model step)."""
    ttft: list[float] = field(default_factory=list)
    """ms, `POST` sent → first text delta received."""
    relay: list[float] = field(default_factory=list)
    """ms, the provider wrote a delta → this process received the event carrying it."""
    to_log: list[float] = field(default_factory=list)
    """ms, the provider wrote a delta → the worker stamped the chunk row carrying it."""
    from_log: list[float] = field(default_factory=list)
    """ms, the chunk row was stamped → this process received its event (the relay proper)."""
    relay_answers: int = 0
    """Exact answers whose deltas were matched to events (one provider request each)."""
    answer: list[float] = field(default_factory=list)
    """s, per exact answer: `POST` sent → its last event received."""
    provider: list[float] = field(default_factory=list)
    """s, per exact answer: its (first) provider request arrived → its last delta written."""
    overhead: list[float] = field(default_factory=list)
    """s, `answer - provider` of the same answer."""
    before_provider: list[float] = field(default_factory=list)
    """s, `POST` sent → the provider request arrived."""
    after_provider: list[float] = field(default_factory=list)
    """s, the provider's last delta written → the answer's last event received."""
    events: int = 0
    text_events: int = 0
    span: float = 0.0
    """s, the first event received → the last, over all chats."""
    peak_mb: dict[str, float] = field(default_factory=dict)
    clock: str = ""
    wall: float = 0.0
    cpu: str = ""
    examples: Counter[str] = field(default_factory=Counter)
    """What went wrong, by kind, for the report."""

    @property
    def chunks_per_second(self) -> float:
        return self.events / self.span if self.span > 0 else 0.0

    @property
    def text_per_second(self) -> float:
        return self.text_events / self.span if self.span > 0 else 0.0

    def details(self) -> list[str]:
        """The lines under the table: how relay and answer time divide, memory, the clock."""
        mb = ", ".join(f"{name} {value:.0f}" for name, value in self.peak_mb.items())
        return [
            f"relay (ms) p50 | p95: provider → log row {p50_p95(self.to_log, 0)}, log row → "
            f"client {p50_p95(self.from_log, 0)}; {len(self.relay)} deltas of "
            f"{self.relay_answers} answers",
            f"answer (s) p50 | p95: POST → provider request {p50_p95(self.before_provider, 2)}, "
            f"provider's last delta → last event {p50_p95(self.after_provider, 2)}",
            f"chunks: {self.events} events ({self.text_events} text deltas) in {self.span:.1f} s",
            f"peak RSS (MB): {mb}",
            f"clocks: {self.clock}",
        ]


async def one_run(
    store: str,
    chats: int,
    count: int,
    delay_ms: int,
    timeout: float,
    keep_logs: Path | None,
    shape: str = "split",
) -> LoadRun:
    result = LoadRun(store=store, chats=chats, shape=shape)
    label = f"{store} {shape}, {chats} chats"
    with TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        try:
            await _measured_run(result, label, workdir, chats, count, delay_ms, timeout)
        finally:
            if keep_logs is not None:
                kept = keep_logs / f"{store}-{shape}-{chats}"
                kept.mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, kept / log.name)
    return result


async def _measured_run(
    result: LoadRun,
    label: str,
    workdir: Path,
    chats: int,
    count: int,
    delay_ms: int,
    timeout: float,
) -> None:
    async with load_cluster(workdir, result.store, result.shape) as cluster:
        fake, url, gateway_url = cluster.fake, cluster.store_url, cluster.gateway_url
        pids, meter = cluster.pids, cluster.meter
        warm_up = CountingTurn(f"warm-up-{uuid.uuid4().hex[:6]}", count, delay_ms)
        tag = f"load-{uuid.uuid4().hex[:6]}-"
        turns = [CountingTurn(f"{tag}{n}", count, delay_ms) for n in range(chats)]
        limits = httpx.Limits(max_connections=chats + 10)
        http_timeout = httpx.Timeout(timeout, connect=30)
        async with httpx.AsyncClient(
            base_url=gateway_url, timeout=http_timeout, limits=limits
        ) as http:
            await warm_up.run(http, timeout)  # the first turn's imports
            print(f"{label}: cluster up, starting the chats", flush=True)
            meter.start()
            started = time.monotonic()
            finished: list[CountingTurn] = []

            async def tracked(turn: CountingTurn) -> None:
                await turn.run(http, timeout)
                finished.append(turn)

            reporter = asyncio.create_task(progress(label, turns, finished, pids, started))
            try:
                await asyncio.gather(*(tracked(turn) for turn in turns))
            finally:
                reporter.cancel()
            result.wall = time.monotonic() - started
            meter.stop()
            result.peak_mb = peak_memory(pids)
            observation = await fake.observe(contains=tag)
            judging = asyncio.Semaphore(20)
            exact: list[CountingTurn] = []

            async def judged(turn: CountingTurn) -> None:
                async with judging:
                    if await judge(http, turn, result):
                        exact.append(turn)

            await asyncio.gather(*(judged(turn) for turn in turns))
        result.cpu = meter.summary(result.wall)
        rows = await asyncio.to_thread(
            chunk_row_times, url, [m for t in exact if (m := message_id(t))]
        )
        measure(result, turns, exact, observation, rows)


async def progress(
    label: str,
    turns: list[CountingTurn],
    finished: list[CountingTurn],
    pids: dict[str, int],
    started: float,
) -> None:
    """A line every `PROGRESS_EVERY` seconds while the chats run."""
    while True:
        await asyncio.sleep(PROGRESS_EVERY)
        failed = sum(1 for turn in finished if turn.failure or not turn.stream.done)
        streaming = sum(
            1
            for turn in turns
            if turn.stream.deltas() and not turn.stream.done and not turn.failure
        )
        memory = ", ".join(
            f"{name} {mb:.0f}"
            for name in PERDURE_PROCESSES
            if name in pids and (mb := rss_mb(pids[name])) is not None
        )
        print(
            f"  {label}: {time.monotonic() - started:.0f} s, {len(finished)}/{len(turns)} "
            f"answers finished ({failed} without [DONE]), {streaming} streaming; "
            f"RSS (MB) {memory}",
            flush=True,
        )


PERDURE_PROCESSES = ("gateway", "worker", "node")
SHAPES = ("split", "node")
"""`split`: a `perdure worker` and a `perdure gateway`; `node`: one `perdure serve`."""


def add_shape_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shape",
        choices=[*SHAPES, "both"],
        default="split",
        help="split: perdure worker + perdure gateway; node: one perdure serve",
    )


def chosen_shapes(option: str) -> list[str]:
    return list(SHAPES) if option == "both" else [option]


@dataclass
class LoadCluster:
    """What a load run measures: one worker and one gateway, each its own process (`split`), or
    one node (`perdure serve`, both in one process), on a fresh store and Temporal dev server,
    the fake provider in a process of its own."""

    fake: RemoteFakeProvider
    store_url: str
    gateway_url: str
    pids: dict[str, int]
    meter: CpuMeter


@contextlib.asynccontextmanager
async def load_cluster(
    workdir: Path, store: str, shape: str = "split"
) -> AsyncIterator[LoadCluster]:
    with RemoteFakeProvider(workdir) as fake, database_url(store, workdir) as url:
        async with running_cluster(workdir, fake, url, SERVED) as cluster:
            async with cluster.temporal() as temporal:
                pids: dict[str, int]
                if shape == "node":
                    gateway_url, node = await cluster.node()
                    await cluster.wait_polling(node)
                    pids = {"node": node.pid}
                else:
                    worker = cluster.worker()
                    gateway_url = await cluster.gateway()
                    await cluster.wait_polling(worker)
                    pids = {"worker": worker.pid, "gateway": cluster.last_gateway.pid}
                pids["fake provider"] = fake.pid
                if isinstance(temporal, subprocess.Popen):
                    pids["temporal"] = temporal.pid
                # The PostgreSQL server shares the machine: its CPU is part of the picture.
                meter = CpuMeter(pids, {"PostgreSQL": "postgres"} if store == "postgres" else None)
                yield LoadCluster(fake, url, gateway_url, pids, meter)


def peak_memory(pids: dict[str, int]) -> dict[str, float]:
    """Peak resident memory of each process, in MB (read while they still run)."""
    found = {name: mb for name, pid in pids.items() if (mb := peak_rss_mb(pid)) is not None}
    found[LOAD_GENERATOR] = own_peak_rss_mb()
    return found


async def judge(http: httpx.AsyncClient, turn: CountingTurn, result: LoadRun) -> bool:
    """Count the turn as exact, corrupted or an error; True when exact."""
    errors = turn.errors()
    corruption = turn.corruption()
    if not turn.stream.events:
        # A stream cut before its first event lacks its `start` chunk: no answer (an error,
        # "ended without [DONE]"), not a corrupted one.
        corruption = [problem for problem in corruption if problem != "0 start chunks"]
    if not errors:
        try:
            corruption += await stored_answer_problems(http, turn)
        except httpx.HTTPError as error:
            errors.append(f"reading the stored answer: {error}")
    exact = False
    if corruption:
        result.corrupted += 1
        result.examples.update(_kind(problem) for problem in corruption)
    elif errors:
        result.errors += 1
        result.examples.update(_kind(problem) for problem in errors)
    else:
        result.exact += 1
        exact = True
    if turn.recoveries():
        result.recovered += 1
    first = turn.first_token_seconds()
    if first is not None:
        result.ttft.append(first * 1000)
    return exact


def _kind(problem: str) -> str:
    """A problem without its particulars, to count alike ones together."""
    return problem.split(":", 1)[0]


def message_id(turn: CountingTurn) -> str | None:
    """The assistant message's id, from the stream's `start` chunk."""
    for _, chunk in turn.stream.events:
        if chunk["type"] == "start" and chunk.get("messageId"):
            return str(chunk["messageId"])
    return None


def chunk_row_times(url: str, message_ids: list[str]) -> dict[str, dict[int, float]]:
    """`created_at` (wall clock) of every chunk row of these messages, by message id and seq."""
    engine = create_engine(sync_url(url))
    found: dict[str, dict[int, float]] = defaultdict(dict)
    try:
        with engine.connect() as connection:
            for start in range(0, len(message_ids), 200):
                query = select(
                    col(ChunkRow.message_id), col(ChunkRow.seq), col(ChunkRow.created_at)
                ).where(col(ChunkRow.message_id).in_(message_ids[start : start + 200]))
                for message, seq, created in connection.execute(query):
                    found[message][seq] = created
    finally:
        engine.dispose()
    return found


def measure(
    result: LoadRun,
    turns: list[CountingTurn],
    exact: list[CountingTurn],
    observation: Observation,
    rows: dict[str, dict[int, float]],
) -> None:
    """Throughput over all chats; relay and answer times over the exact answers."""
    received = [at for turn in turns for at in turn.stream.received_at]
    result.events = len(received)
    result.text_events = sum(turn.stream.deltas() for turn in turns)
    result.span = max(received) - min(received) if received else 0.0
    # Rows are stamped with `time.time()`; both clocks are the machine's, so one offset turns
    # a wall-clock stamp into this process's `time.monotonic()`.
    offset = time.time() - time.monotonic()
    by_text: dict[str, list[ProviderRequest]] = defaultdict(list)
    for request in observation.requests:
        by_text[request.user_text].append(request)
    for turn in exact:
        requests = by_text.get(turn.user_text, [])
        served = [request for request in requests if request.delta_times]
        if not served:
            continue
        answer = turn.stream.received_at[-1] - turn.posted_at
        begun = min(request.started_at for request in requests)
        ended = max(request.delta_times[-1] for request in served)
        result.answer.append(answer)
        result.provider.append(ended - begun)
        result.overhead.append(answer - (ended - begun))
        result.before_provider.append(begun - turn.posted_at)
        result.after_provider.append(turn.stream.received_at[-1] - ended)
        pieces = words(counting(turn.count))
        if len(requests) != 1 or len(requests[0].delta_times) != len(pieces):
            continue  # a retried step: its deltas are not one-to-one with the text
        logged = rows.get(message_id(turn) or "", {})
        result.relay_answers += 1
        for written, at, seq in deliveries(turn, pieces, requests[0].delta_times):
            result.relay.append((at - written) * 1000)
            if (stamped := logged.get(seq)) is not None:
                result.to_log.append((stamped - offset - written) * 1000)
                result.from_log.append((at - (stamped - offset)) * 1000)
    early = [-value for value in result.relay if value < 0]
    result.clock = (
        "the fake provider's time.monotonic() was "
        + (
            "inside"
            if observation.clock_skew == 0
            else f"{observation.clock_skew * 1000:.1f} ms outside"
        )
        + f" this process's {observation.bracket * 1000:.1f} ms bracket of its read; "
        f"{len(early)} of {len(result.relay)} deltas received before the fake's stamp"
        + (f" (by at most {max(early):.1f} ms)" if early else "")
    )


def deliveries(
    turn: CountingTurn, pieces: list[str], written_at: list[float]
) -> list[tuple[float, float, int]]:
    """`(written, received, seq)` for each provider delta: when the provider wrote it, when
    this process received the first event whose text reaches its end, and that event's seq.
    By position in the text, so deltas the worker coalesced or split still match exactly."""
    texts = [
        (chunk.get("delta", ""), at, seq)
        for (seq, chunk), at in zip(turn.stream.events, turn.stream.received_at, strict=True)
        if chunk["type"] == "text-delta"
    ]
    covering = covering_events([text for text, _, _ in texts], pieces)
    return [
        (written, texts[index][1], texts[index][2])
        for written, index in zip(written_at, covering, strict=True)
    ]


def table(runs: list[LoadRun]) -> list[str]:
    lines = [
        "| store | shape | chats | answered exactly | corrupted | errors | recovered "
        "| TTFT (ms) p50 | p95 | max | relay (ms) p50 | p95 | chunks/s | text deltas/s "
        "| answer (s) p50 | p95 | provider's (s) p50 | p95 | overhead (s) p50 | p95 "
        "| peak RSS (MB) | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        memory = ", ".join(
            f"{name} {run.peak_mb[name]:.0f}" for name in PERDURE_PROCESSES if name in run.peak_mb
        )
        lines.append(
            f"| {run.store} | {run.shape} | {run.chats} | {run.exact} | **{run.corrupted}** | {run.errors} "
            f"| {run.recovered} | {stats(run.ttft, 0)} | {p50_p95(run.relay, 0)} "
            f"| {run.chunks_per_second:.0f} | {run.text_per_second:.0f} "
            f"| {p50_p95(run.answer, 2)} | {p50_p95(run.provider, 2)} "
            f"| {p50_p95(run.overhead, 2)} | {memory} | {run.wall:.1f} |"
        )
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", default="50,150,300,500", help="comma-separated chat counts")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    add_shape_option(parser)
    parser.add_argument("--count", type=int, default=30, help="tokens per answer")
    parser.add_argument("--delay-ms", type=int, default=50, help="ms between tokens")
    parser.add_argument(
        "--timeout", type=float, default=CHAT_TIMEOUT, help="seconds a chat may take at most"
    )
    parser.add_argument(
        "--keep-logs",
        type=Path,
        help="copy the worker's and gateway's logs of each run here (<store>-<chats>/)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.chats.split(",") if n.strip()]
    stores = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    if "postgres" in stores and (reason := postgres_available()) is not None:
        if args.store == "postgres":
            parser.error(reason)
        print(f"skipping postgres: {reason}")
        stores.remove("postgres")
    shapes = chosen_shapes(args.shape)
    runs: list[LoadRun] = []
    for store, shape, chats in itertools.product(stores, shapes, counts):
        run = await one_run(
            store, chats, args.count, args.delay_ms, args.timeout, args.keep_logs, shape
        )
        runs.append(run)
        print(
            f"{store} {shape}, {chats} chats: {run.exact} exact, {run.corrupted} corrupted, "
            f"{run.errors} errors, {run.recovered} recovered, wall {run.wall:.1f} s; "
            f"TTFT p50 | p95 {p50_p95(run.ttft, 0)} ms, relay p50 | p95 "
            f"{p50_p95(run.relay, 0)} ms, {run.chunks_per_second:.0f} chunks/s",
            flush=True,
        )
        for line in [run.cpu, *run.details()]:
            print(f"  {line}", flush=True)
        if run.examples:
            print(f"  problems: {dict(run.examples.most_common(8))}", flush=True)
    print()
    print(
        f"each chat: @count {args.count} @delay {args.delay_ms} "
        f"({1000 / args.delay_ms:g} tokens/s); all chats of a run started at once"
    )
    print("\n".join(table(runs)))
    for run in runs:
        print(f"{run.store} {run.shape}, {run.chats} chats: {run.cpu}")
        for line in run.details():
            print(f"  {line}")


if __name__ == "__main__":
    asyncio.run(main())
