"""Perdure side by side with the designs it could have been: a session entity
workflow, Temporal's Workflow Streams, and the provider called directly with no durability
(the floor), against one fake provider, on this machine, in one run.

    .venv/bin/python -m bench.compare [--quick] [--systems perdure,session-entity,...]
        [--turns 40] [--turns-per-chat 4] [--provider-ttft-ms 0] [--tool-turns 3] [--tool-calls 20]
        [--sessions 100,300,500] [--no-kill] [--store sqlite|postgres] [--markdown out.md]
        [--keep-logs DIR]

Every system runs as real processes: its own Temporal dev server (the same settings for all,
temporal-dev.yml's), one worker process and one gateway process (Perdure: `perdure worker` +
`perdure gateway` on the store; the floor: the gateway alone); the fake provider is one process
for the whole run (`python -m perdure.testing.fakeprovider`). `perdure-head-start` is Perdure
with a `perdure relay` beside them, through which its gateway sends each turn's first request at
intake (its head start). Per system, in this order:

- warm-up turns, then `--turns` turns one after another (chats of `--turns-per-chat` turns),
  each `@count 20 @delay 20` (after `@ttft N` with `--provider-ttft-ms N`: the provider's own
  wait before its first token, which a head start overlaps with the workflow's start):
  - TTFT overhead: `POST /api/chat` sent → the first text delta parsed by this process, minus the
    provider's own time to first token (its request received → its first delta written);
  - relay latency: each delta written by the provider → this process receiving the event that
    carries it (matched by position in the text, so coalesced deltas match exactly). Both
    clocks are `time.monotonic()`, one clock on Linux: the fake stamps what it writes and
    reports it on its test-only route `GET /_fake/requests`;
  - Temporal history bytes per turn: the serialized size of every history event of the
    workflows these turns ran (Perdure: each `TurnWorkflow`; session entity: the chats'
    session workflows, whole, plus every child turn workflow; Workflow Streams: each turn's
    workflow), summed, over the number of turns;
- tool rounds: `--tool-turns` turns (after one warm-up turn), each a new chat scripted as
  `bench.tool_rounds` scripts its turns: `--tool-calls` lines `@tool wait {"seconds": 0}`, then
  `@delay 1`: the model calls the tool once per request, the tool returns at once, and after the
  last call the model answers. Perdure runs them with its `long-tool-loop` agent (the rounds in
  its model step); the alternatives run each model call and each tool call as an activity (the
  floor: in its gateway). A round is one provider request → the turn's next, by the fake's
  clock, p50 / p90; a turn counts only if its answer is the fake's exact final text and the fake
  saw exactly one request per call plus one;
- `--sessions` levels: that many chats at once, one turn each, `@count 30 @delay 50`, on the
  one worker and one gateway: errors (no exact answer within `--timeout`), relay p95, wall time;
  each level on a fresh instance of the system (a level's stragglers never load the next);
- SIGKILL: a turn streams `@count 400 @delay 10`; after 50 deltas reach the client the worker
  process is SIGKILLed (the floor: its gateway, the only process doing the work) and a new one
  started at once; the client reads on (or, if its stream broke, asks the gateway to resume) for
  at most `--kill-wait` seconds. The text it ends with is classified against `1 … 400`: exact,
  duplicated, lost, or never finished — for an AI SDK client, which appends every text delta,
  and for a client that also honours the alternatives' `data-retry` reset (drops what it showed).

The table gives each figure with its ratio to Perdure's; `--markdown` writes it to a file too.
`--quick`: 4 turns, one tool turn of 5 calls, 10 sessions at once (on the turns' instance), the
SIGKILL run. Every process
is stopped at the end, on an error and on Ctrl-C; workers and gateways also die with this process
(`PR_SET_PDEATHSIG`) if it is killed outright.
"""

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import shutil
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx
from temporalio.api.history.v1 import History
from temporalio.client import Client

from bench._support import SERVED, Observation, ProviderRequest, RemoteFakeProvider, p50_p95
from bench.alternatives._common import WORKER_READY, AltProcess, wait_healthy
from bench.delta_matching import covering_events
from bench.latency import percentile
from bench.tool_rounds import answer as tool_answer
from bench.tool_rounds import script as tool_script
from perdure.domain.names import turn_workflow_id
from perdure.runtime.temporal_dev import dev_server
from perdure.testing.chat_client import counting
from perdure.testing.cluster import LiveStream, running_cluster
from perdure.testing.databases import database_url, postgres_available
from perdure.testing.fakeprovider.script import words
from perdure.testing.processes import PerdureProcess
from perdure.testing.stack import free_port

SYSTEMS = ["perdure", "perdure-head-start", "session-entity", "workflow-streams", "direct"]
TITLES = {
    "perdure": "Perdure",
    "perdure-head-start": "Perdure, head start",
    "session-entity": "session entity",
    "workflow-streams": "Workflow Streams",
    "direct": "direct (floor)",
}
KILL_AFTER = 50
TOOL_AGENT = "long-tool-loop"
"""Perdure's agent for the tool turns (bench.tool_rounds's): tool rounds run in its model step."""


@dataclass
class Options:
    systems: list[str] = field(default_factory=lambda: list(SYSTEMS))
    warm_up: int = 3
    turns: int = 40
    turns_per_chat: int = 4
    count: int = 20
    delay_ms: int = 20
    provider_ttft_ms: int = 0
    """The fake's wait before a sequential turn's first delta (`@ttft`), as a model's."""
    sessions: list[int] = field(default_factory=lambda: [100, 300, 500])
    load_count: int = 30
    load_delay_ms: int = 50
    tool_turns: int = 3
    tool_calls: int = 20
    timeout: float = 60.0
    kill: bool = True
    kill_count: int = 400
    kill_delay_ms: int = 10
    kill_wait: float = 60.0
    store: str = "sqlite"
    keep_logs: Path | None = None
    fresh_per_level: bool = True
    """Each level of sessions at once on a fresh instance (else on the turns' instance)."""


# -- the systems -------------------------------------------------------------------------------


class System(ABC):
    """One design, running: its gateway's URL, its Temporal server, and its worker to kill."""

    name = ""
    sends_history = False
    """Whether its client sends the whole conversation with every message (stateless servers)."""

    def __init__(self) -> None:
        self.url = ""
        self.temporal_address: str | None = None
        self._client: Client | None = None

    async def client(self) -> Client:
        assert self.temporal_address is not None
        if self._client is None:
            self._client = await Client.connect(self.temporal_address)
        return self._client

    @abstractmethod
    def kill_worker(self) -> None:
        """SIGKILL the process doing the turns' work."""

    @abstractmethod
    async def start_worker(self) -> None:
        """Start its replacement."""

    def workflow_ids(self, turn: "Turn") -> list[str]:
        """The workflows whose histories a turn adds to (shared ones are counted once)."""
        return []

    def logs(self) -> str:
        return ""


class PerdureSystem(System):
    name = "perdure"
    relayed = False

    def __init__(self, workdir: Path, fake: RemoteFakeProvider, store: str) -> None:
        super().__init__()
        self.workdir, self.fake, self.store = workdir, fake, store
        self.worker: PerdureProcess | None = None
        self._cluster: Any = None
        self.relay_env: dict[str, str] = {}
        """Where its worker and gateway find the provider relay (none without one)."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["PerdureSystem"]:
        with database_url(self.store, self.workdir) as url:
            async with running_cluster(self.workdir, self.fake, url, SERVED) as cluster:
                self._cluster = cluster
                self.temporal_address = cluster.temporal_address
                async with cluster.temporal():
                    if self.relayed:
                        self.relay_env = await cluster.relay()
                    self.worker = cluster.worker(**self.relay_env)
                    self.url = await cluster.gateway(**self.relay_env)
                    await cluster.wait_polling(self.worker)
                    yield self

    def kill_worker(self) -> None:
        assert self.worker is not None
        self.worker.kill()

    async def start_worker(self) -> None:
        self.worker = self._cluster.worker(**self.relay_env)

    def workflow_ids(self, turn: "Turn") -> list[str]:
        for _, chunk in turn.stream.events:
            if chunk["type"] == "start":
                return [turn_workflow_id(chunk["messageMetadata"]["submissionId"])]
        return []

    def logs(self) -> str:
        return str(self._cluster.logs()) if self._cluster is not None else ""


class AltSystem(System):
    """An alternative of bench/alternatives/: its module serves `worker` and `gateway`."""

    module = ""

    def __init__(self, workdir: Path, fake: RemoteFakeProvider) -> None:
        super().__init__()
        self.workdir, self.fake = workdir, fake
        self.env = fake.env()
        self.processes: list[AltProcess] = []
        self.worker: AltProcess | None = None
        self.task_queue = f"{self.name}-{uuid.uuid4().hex[:8]}"

    def _process(self, role: str, *extra: str) -> AltProcess:
        args = ["-m", self.module, role, *extra]
        if self.temporal_address is not None:
            args += ["--address", self.temporal_address, "--task-queue", self.task_queue]
        process = AltProcess(f"{self.name}-{role}", args, self.env, self.workdir).start()
        self.processes.append(process)
        return process

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["AltSystem"]:
        try:
            if self.module.endswith(".direct"):
                await self._start_gateway()
                yield self
                return
            self.temporal_address = f"127.0.0.1:{free_port()}"
            async with dev_server(
                address=self.temporal_address,
                ui_port=None,
                db_file=self.workdir / f"temporal-{self.name}.db",
                namespace="default",
            ):
                try:
                    await self.start_worker()
                    assert self.worker is not None
                    await self.worker.wait_for_line(WORKER_READY)
                    await self._start_gateway()
                    yield self
                finally:
                    self.stop()
        finally:
            self.stop()

    async def _start_gateway(self) -> None:
        port = free_port()
        self.gateway = self._process("gateway", "--port", str(port))
        self.url = f"http://127.0.0.1:{port}"
        await wait_healthy(self.url, self.gateway)

    def kill_worker(self) -> None:
        assert self.worker is not None
        self.worker.kill()

    async def start_worker(self) -> None:
        self.worker = self._process("worker")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.output()[-3000:]}" for p in self.processes)


class SessionEntitySystem(AltSystem):
    name = "session-entity"
    module = "bench.alternatives.session_entity"

    def workflow_ids(self, turn: "Turn") -> list[str]:
        from bench.alternatives.session_entity import session_workflow_id

        child = message_id(turn)
        return [session_workflow_id(turn.chat)] + ([child] if child else [])


class WorkflowStreamsSystem(AltSystem):
    name = "workflow-streams"
    module = "bench.alternatives.workflow_streams"
    sends_history = True

    def workflow_ids(self, turn: "Turn") -> list[str]:
        found = message_id(turn)
        return [found] if found else []


class DirectSystem(AltSystem):
    name = "direct"
    module = "bench.alternatives.direct"
    sends_history = True

    def kill_worker(self) -> None:
        self.gateway.kill()  # the gateway is the process doing the work

    async def start_worker(self) -> None:
        port = int(self.url.rsplit(":", 1)[1])
        self.gateway = self._process("gateway", "--port", str(port))
        await wait_healthy(self.url, self.gateway)


# -- one turn ----------------------------------------------------------------------------------


@dataclass
class Turn:
    chat: str
    text: str
    count: int
    stream: LiveStream = field(default_factory=LiveStream)
    posted_at: float = 0.0
    failure: str | None = None
    resumed: str | None = None
    """What asking the gateway to resume a broken stream gave (kill runs)."""

    def first_delta_at(self) -> float | None:
        for (_, chunk), at in zip(self.stream.events, self.stream.received_at, strict=True):
            if chunk["type"] == "text-delta":
                return at
        return None

    def reset_aware_text(self) -> str:
        """The text after the last `data-retry` chunk: what a client that honours it shows."""
        text: list[str] = []
        for _, chunk in self.stream.events:
            if chunk["type"] == "data-retry":
                text = []
            elif chunk["type"] == "text-delta":
                text.append(chunk.get("delta", ""))
        return "".join(text)

    def retries(self) -> int:
        return sum(1 for _, chunk in self.stream.events if chunk["type"] == "data-retry")

    def exact(self) -> bool:
        return (
            self.failure is None
            and self.stream.done
            and not self.retries()
            and self.stream.text() == counting(self.count)
            and not any(c["type"] in ("error", "abort") for _, c in self.stream.events)
        )


def message_id(turn: Turn) -> str | None:
    for _, chunk in turn.stream.events:
        if chunk["type"] == "start":
            return str(chunk.get("messageId") or "") or None
    return None


def ui_message(role: str, text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex[:16], "role": role, "parts": [{"type": "text", "text": text}]}


class Chat:
    """A chat of the client: its id, and the conversation for clients that send it whole."""

    def __init__(self, chat_id: str, agent: str | None = None) -> None:
        self.id = chat_id
        self.agent = agent
        """Perdure's agent for the chat (the alternatives have one each, and ignore it)."""
        self.messages: list[dict[str, Any]] = []

    async def send(
        self,
        http: httpx.AsyncClient,
        system: System,
        text: str,
        count: int,
        timeout: float,
        turn: Turn | None = None,
    ) -> Turn:
        turn = turn or Turn(self.id, text, count)
        user = ui_message("user", text)
        history = self.messages if system.sends_history else []
        body: dict[str, Any] = {
            "id": self.id,
            "messages": [*history, user],
            "trigger": "submit-message",
        }
        if self.agent is not None:
            body["agent"] = self.agent
        turn.posted_at = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with http.stream("POST", "/api/chat", json=body) as response:
                    if response.status_code != 200:
                        await response.aread()
                        turn.failure = f"HTTP {response.status_code}: {response.text[:200]}"
                        return turn
                    await turn.stream.read(response)
        except (httpx.HTTPError, TimeoutError) as error:
            turn.failure = f"{type(error).__name__}: {error}"
        self.messages += [user, ui_message("assistant", turn.reset_aware_text())]
        return turn


# -- measurements ------------------------------------------------------------------------------


@dataclass
class Latency:
    turns: int = 0
    exact: int = 0
    ttft: list[float] = field(default_factory=list)
    """ms: `POST` → first delta at the client, minus the provider's own time to first token."""
    relay: list[float] = field(default_factory=list)
    """ms: the provider wrote a delta → the client received it."""
    history_bytes: float | None = None
    """Temporal history bytes per turn."""
    history_detail: str = ""


@dataclass
class ToolRounds:
    turns: int = 0
    exact: int = 0
    rounds: list[float] = field(default_factory=list)
    """ms: a provider request that called the tool → the turn's next provider request."""
    problems: Counter[str] = field(default_factory=Counter)


@dataclass
class Load:
    sessions: int
    exact: int = 0
    errors: int = 0
    relay: list[float] = field(default_factory=list)
    wall: float = 0.0
    problems: Counter[str] = field(default_factory=Counter)


@dataclass
class Kill:
    plain: str = ""
    """What an AI SDK client (appends every text delta) ends with."""
    reset_aware: str = ""
    """What a client that honours `data-retry` ends with."""
    ended_after: float | None = None
    """s, SIGKILL → the stream's last event."""
    detail: str = ""


@dataclass
class SystemResult:
    name: str
    latency: Latency = field(default_factory=Latency)
    tools: ToolRounds = field(default_factory=ToolRounds)
    loads: list[Load] = field(default_factory=list)
    kill: Kill | None = None
    error: str | None = None


def by_text(observation: Observation) -> dict[str, list[ProviderRequest]]:
    found: dict[str, list[ProviderRequest]] = defaultdict(list)
    for request in observation.requests:
        found[request.user_text].append(request)
    return found


def relay_samples(turn: Turn, requests: list[ProviderRequest]) -> list[float]:
    """ms from each provider delta written to the first event whose text reaches its end; only
    for an exact answer served by one provider request (a retry's deltas are not one-to-one)."""
    pieces = words(counting(turn.count))
    if not turn.exact() or len(requests) != 1 or len(requests[0].delta_times) != len(pieces):
        return []
    texts = [
        (chunk.get("delta", ""), at)
        for (_, chunk), at in zip(turn.stream.events, turn.stream.received_at, strict=True)
        if chunk["type"] == "text-delta"
    ]
    covering = covering_events([text for text, _ in texts], pieces)
    return [
        (texts[index][1] - written) * 1000
        for written, index in zip(requests[0].delta_times, covering, strict=True)
    ]


async def history_bytes(system: System, turns: list[Turn]) -> tuple[float | None, str]:
    """Serialized history bytes of the turns' workflows, per turn, and a breakdown by kind."""
    if system.temporal_address is None or not turns:
        return None, ""
    client = await system.client()
    ids = list(dict.fromkeys(i for turn in turns for i in system.workflow_ids(turn)))
    kinds: Counter[str] = Counter()
    total = 0
    for workflow_id in ids:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        size = History(events=list(history.events)).ByteSize()
        total += size
        kind = "turn" if "turn" in workflow_id or system.name != "session-entity" else "session"
        kinds[kind] += size
    detail = ", ".join(f"{kind} {size / len(turns):,.0f}" for kind, size in sorted(kinds.items()))
    return total / len(turns), detail


async def latency_phase(system: System, fake: RemoteFakeProvider, options: Options) -> Latency:
    result = Latency()
    tag = f"lat-{uuid.uuid4().hex[:6]}"
    ttft = f"@ttft {options.provider_ttft_ms} " if options.provider_ttft_ms else ""
    prompt = f"{ttft}@count {options.count} @delay {options.delay_ms}"
    async with httpx.AsyncClient(base_url=system.url, timeout=60) as http:
        for n in range(options.warm_up):
            await Chat(f"warm-{tag}-{n}").send(
                http, system, f"{prompt} warm-{tag}-{n}", options.count, options.timeout
            )
        turns: list[Turn] = []
        chats = math.ceil(options.turns / options.turns_per_chat)
        for c in range(chats):
            chat = Chat(f"{tag}-{c}")
            for t in range(min(options.turns_per_chat, options.turns - len(turns))):
                text = f"{prompt} {tag}-{c}-{t}"
                turns.append(await chat.send(http, system, text, options.count, options.timeout))
    observed = by_text(await fake.observe(contains=tag))
    result.turns = len(turns)
    for turn in turns:
        if not turn.exact():
            continue
        result.exact += 1
        requests = observed.get(turn.text, [])
        first = turn.first_delta_at()
        if len(requests) == 1 and requests[0].delta_times and first is not None:
            own = requests[0].delta_times[0] - requests[0].started_at
            result.ttft.append((first - turn.posted_at - own) * 1000)
        result.relay += relay_samples(turn, requests)
    result.history_bytes, result.history_detail = await history_bytes(system, turns)
    return result


async def tool_rounds_phase(
    system: System, fake: RemoteFakeProvider, options: Options
) -> ToolRounds:
    result = ToolRounds()
    tag = f"tools-{uuid.uuid4().hex[:6]}"
    warm_up = min(1, options.warm_up)
    turns: list[Turn] = []
    async with httpx.AsyncClient(base_url=system.url, timeout=60) as http:
        for n in range(warm_up + options.tool_turns):
            chat = Chat(f"{tag}-{n}", agent=TOOL_AGENT)
            text = tool_script(options.tool_calls, f"{tag}-{n}")
            turns.append(await chat.send(http, system, text, 0, options.timeout))
    observed = by_text(await fake.observe(contains=tag))
    for turn in turns[warm_up:]:
        result.turns += 1
        requests = sorted(observed.get(turn.text, []), key=lambda request: request.started_at)
        wrong = tool_turn_problem(turn, requests, options.tool_calls)
        if wrong is not None:
            result.problems[wrong] += 1
            continue
        result.exact += 1
        result.rounds += [
            (following.started_at - request.started_at) * 1000
            for request, following in itertools.pairwise(requests)
        ]
    return result


def tool_turn_problem(turn: Turn, requests: list[ProviderRequest], calls: int) -> str | None:
    """Why a tool turn does not count, or None: its answer must be the fake's final text, after
    exactly one provider request per call and one more, each answered."""
    broken = stream_problem(turn)
    if broken is not None:
        return broken
    if turn.retries():
        return "a model call retried (data-retry)"
    if turn.stream.text() != tool_answer(calls):
        return f"answered {turn.stream.text()[:60]!r}"
    if len(requests) != calls + 1:
        return f"{len(requests)} provider requests for {calls} calls"
    if any(request.status != 200 for request in requests):
        return f"provider statuses {[request.status for request in requests]}"
    return None


async def load_phase(
    system: System, fake: RemoteFakeProvider, sessions: int, options: Options
) -> Load:
    result = Load(sessions)
    tag = f"load{sessions}-{uuid.uuid4().hex[:6]}"
    prompt = f"@count {options.load_count} @delay {options.load_delay_ms}"
    limits = httpx.Limits(max_connections=sessions + 10)
    timeout = httpx.Timeout(options.timeout, connect=30)
    async with httpx.AsyncClient(base_url=system.url, timeout=timeout, limits=limits) as http:
        started = time.monotonic()
        turns = await asyncio.gather(
            *(
                Chat(f"{tag}-{n}").send(
                    http, system, f"{prompt} {tag}-{n}", options.load_count, options.timeout
                )
                for n in range(sessions)
            )
        )
        result.wall = time.monotonic() - started
    observed = by_text(await fake.observe(contains=tag))
    for turn in turns:
        if turn.exact():
            result.exact += 1
            result.relay += relay_samples(turn, observed.get(turn.text, []))
        else:
            result.errors += 1
            result.problems[problem(turn)] += 1
    return result


def stream_problem(turn: Turn) -> str | None:
    """Why a turn's stream broke (a failure, an error chunk, no `[DONE]`), or None."""
    if turn.failure:
        return turn.failure[:120]
    errors = [c for _, c in turn.stream.events if c["type"] in ("error", "abort")]
    if errors:
        return f"{errors[0]['type']} chunk: {str(errors[0].get('errorText', ''))[:60]}"
    if not turn.stream.done:
        return "no [DONE]"
    return None


def problem(turn: Turn) -> str:
    broken = stream_problem(turn)
    if broken is not None:
        return broken
    if turn.retries():
        return f"activity retried (data-retry), then {classify(turn.reset_aware_text(), turn.count, True)}"
    return classify(turn.stream.text(), turn.count, True)


def _missing_chars(expected: Counter[str], got: Counter[str]) -> int:
    """The characters of the expected tokens the text lacks (with their separating spaces)."""
    return sum((len(token) + 1) * n for token, n in (expected - got).items())


def classify(text: str, count: int, finished: bool) -> str:
    """The client's final text against `1 … count`: duplicated (how many characters it holds
    beyond the expected text's), lost (how many expected tokens it lacks), never finished."""
    expected = Counter(counting(count).split())
    got = Counter(text.split())
    if finished and text == counting(count):
        return "exact"
    missing = sum((expected - got).values())
    extra = sum((got - expected).values())
    found = []
    if extra:
        found.append(
            f"duplicated (+{len(text) - len(counting(count)) + _missing_chars(expected, got)} chars)"
        )
    if missing:
        found.append(f"lost ({missing} of {count} tokens missing)")
    if not finished:
        found.append("never finished")
    return ", ".join(found) or "exact text, out of order"


async def kill_phase(system: System, options: Options) -> Kill:
    result = Kill()
    chat = Chat(f"kill-{uuid.uuid4().hex[:8]}")
    text = f"@count {options.kill_count} @delay {options.kill_delay_ms} {chat.id}"
    async with httpx.AsyncClient(base_url=system.url, timeout=options.kill_wait + 30) as http:
        turn = Turn(chat.id, text, options.kill_count)
        reading = asyncio.create_task(
            chat.send(http, system, text, options.kill_count, options.kill_wait + 60, turn)
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not reading.done():
            if turn.stream.deltas() >= KILL_AFTER:
                break
            await asyncio.sleep(0.01)
        killed_at = time.monotonic()
        system.kill_worker()
        await system.start_worker()
        try:
            await asyncio.wait_for(reading, timeout=options.kill_wait)
        except TimeoutError:
            result.plain = result.reset_aware = "never finished (no end within the wait)"
            return result
    finished = turn.stream.done and turn.failure is None
    if not finished and system.name == "direct":
        async with httpx.AsyncClient(base_url=system.url, timeout=10) as http:
            response = await http.get(f"/api/chat/{chat.id}/stream")
            turn.resumed = f"resume → HTTP {response.status_code}"
    result.plain = classify(turn.stream.text(), options.kill_count, finished)
    result.reset_aware = classify(turn.reset_aware_text(), options.kill_count, finished)
    if turn.stream.received_at:
        result.ended_after = max(0.0, turn.stream.received_at[-1] - killed_at)
    parts = [f"{turn.stream.deltas()} deltas received", f"{turn.retries()} data-retry"]
    if turn.failure:
        parts.append(turn.failure[:80])
    if turn.resumed:
        parts.append(turn.resumed)
    result.detail = "; ".join(parts)
    return result


@contextlib.asynccontextmanager
async def instance(
    name: str, root: Path, label: str, fake: RemoteFakeProvider, options: Options
) -> AsyncIterator[System]:
    """A fresh instance of the system (its own Temporal server, store and processes)."""
    workdir = root / name / label
    workdir.mkdir(parents=True)
    system = make_system(name, workdir, fake, options.store)
    try:
        async with system.running() as running:
            yield running
    except Exception:
        print(f"  {TITLES[name]} ({label}) failed; its logs:\n{system.logs()}", flush=True)
        raise


async def measure(
    result: SystemResult, root: Path, fake: RemoteFakeProvider, options: Options
) -> None:
    """The sequential turns and the SIGKILL run on one instance, then each level of sessions
    at once on an instance of its own (so that a level's stragglers never load the next)."""
    label = TITLES[result.name]
    async with instance(result.name, root, "turns", fake, options) as system:
        started = time.monotonic()
        result.latency = lat = await latency_phase(system, fake, options)
        print(
            f"  {label}: {lat.exact}/{lat.turns} turns exact, TTFT overhead p50 | p95 "
            f"{p50_p95(lat.ttft, 1)} ms, relay p50 | p95 {p50_p95(lat.relay, 1)} ms, history "
            f"{_bytes(lat.history_bytes)} B/turn ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        if options.tool_turns:
            started = time.monotonic()
            result.tools = tools = await tool_rounds_phase(system, fake, options)
            problems = f", problems {dict(tools.problems.most_common(4))}" if tools.problems else ""
            print(
                f"  {label}: {tools.exact}/{tools.turns} tool turns exact ({options.tool_calls} "
                f"calls each), round p50 | p90 {p50_p90(tools.rounds)} ms "
                f"({time.monotonic() - started:.0f} s){problems}",
                flush=True,
            )
        if not options.fresh_per_level:
            for sessions in options.sessions:
                await _load_level(result, system, fake, sessions, options)
        if options.kill:
            result.kill = kill = await kill_phase(system, options)
            print(
                f"  {label}: SIGKILL: AI SDK client {kill.plain}; reset-aware client "
                f"{kill.reset_aware}; ended {_seconds(kill.ended_after)} after the kill "
                f"({kill.detail})",
                flush=True,
            )
    if options.fresh_per_level:
        for sessions in options.sessions:
            async with instance(result.name, root, f"sessions-{sessions}", fake, options) as system:
                await _load_level(result, system, fake, sessions, options)


async def _load_level(
    result: SystemResult,
    system: System,
    fake: RemoteFakeProvider,
    sessions: int,
    options: Options,
) -> None:
    load = await load_phase(system, fake, sessions, options)
    result.loads.append(load)
    problems = f", problems {dict(load.problems.most_common(4))}" if load.problems else ""
    print(
        f"  {TITLES[result.name]}: {sessions} sessions: {load.exact} exact, {load.errors} "
        f"errors, relay p50 | p95 {p50_p95(load.relay, 0)} ms, wall {load.wall:.1f} s{problems}",
        flush=True,
    )


class HeadStartSystem(PerdureSystem):
    """Perdure with a `perdure relay` that its gateway sends each turn's first request through
    at intake (docs/relay.md, "Head start") and its worker's steps adopt."""

    name = "perdure-head-start"
    relayed = True


def make_system(name: str, workdir: Path, fake: RemoteFakeProvider, store: str) -> Any:
    if name == "perdure":
        return PerdureSystem(workdir, fake, store)
    if name == "perdure-head-start":
        return HeadStartSystem(workdir, fake, store)
    kinds = {
        "session-entity": SessionEntitySystem,
        "workflow-streams": WorkflowStreamsSystem,
        "direct": DirectSystem,
    }
    return kinds[name](workdir, fake)


async def run(options: Options) -> list[SystemResult]:
    results: list[SystemResult] = []
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        try:
            with RemoteFakeProvider(root) as fake:
                for name in options.systems:
                    print(f"{TITLES[name]}:", flush=True)
                    result = SystemResult(name)
                    results.append(result)
                    try:
                        await measure(result, root, fake, options)
                    except Exception as error:
                        result.error = f"{type(error).__name__}: {error}"
                        print(f"  {TITLES[name]} failed: {result.error}", flush=True)
        finally:
            if options.keep_logs is not None:
                for log in root.rglob("*.log"):
                    kept = options.keep_logs / log.relative_to(root)
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(log, kept)
    return results


# -- the report --------------------------------------------------------------------------------


def _bytes(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def _with_ratio(value: float | None, base: float | None, digits: int, unit: str = "") -> str:
    if value is None:
        return "–"
    cell = f"{value:,.{digits}f}{unit}"
    if base:
        cell += f" (×{value / base:.2f})"
    return cell


def _pct(values: list[float], q: float) -> float | None:
    return percentile(values, q) if values else None


def p50_p90(values: list[float]) -> str:
    if not values:
        return "– | –"
    return f"{percentile(values, 50):.1f} | {percentile(values, 90):.1f}"


def table(results: list[SystemResult], options: Options) -> list[str]:
    by_name = {result.name: result for result in results}
    names = [name for name in options.systems if name in by_name]
    base = by_name.get("perdure")
    floor = by_name.get("direct")
    lines = [
        "| | " + " | ".join(TITLES[name] for name in names) + " |",
        "|---|" + "---|" * len(names),
    ]

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(by_name[name]) for name in names) + " |")

    def metric(values: Any, q: float, digits: int) -> Any:
        def cell(result: SystemResult) -> str:
            if result.error:
                return "failed"
            mine = _pct(values(result), q)
            theirs = _pct(values(base), q) if base and not base.error else None
            return _with_ratio(mine, theirs, digits)

        return cell

    row("answers exact (sequential turns)", lambda r: f"{r.latency.exact}/{r.latency.turns}")
    row("TTFT overhead p50 (ms)", metric(lambda r: r.latency.ttft, 50, 1))
    row("TTFT overhead p95 (ms)", metric(lambda r: r.latency.ttft, 95, 1))

    def above_floor(result: SystemResult) -> str:
        mine = _pct(result.latency.ttft, 50)
        theirs = _pct(floor.latency.ttft, 50) if floor else None
        return "–" if mine is None or theirs is None else f"{mine - theirs:+.1f}"

    row("TTFT overhead above the floor, p50 (ms)", above_floor)
    row("relay latency p50 (ms)", metric(lambda r: r.latency.relay, 50, 1))
    row("relay latency p95 (ms)", metric(lambda r: r.latency.relay, 95, 1))

    def history(result: SystemResult) -> str:
        value = result.latency.history_bytes
        theirs = base.latency.history_bytes if base else None
        cell = _with_ratio(value, theirs, 0)
        if result.latency.history_detail and result.name == "session-entity":
            cell += f" ({result.latency.history_detail})"
        return cell

    row("Temporal history bytes per turn", history)
    if options.tool_turns:
        row("answers exact (tool turns)", lambda r: f"{r.tools.exact}/{r.tools.turns}")
        row("tool round p50 (ms)", metric(lambda r: r.tools.rounds, 50, 1))
        row("tool round p90 (ms)", metric(lambda r: r.tools.rounds, 90, 1))
    for index, sessions in enumerate(options.sessions):

        def load_cell(result: SystemResult, index: int = index) -> str:
            if len(result.loads) <= index:
                return "–"
            load = result.loads[index]
            mine = _pct(load.relay, 95)
            theirs = _pct(base.loads[index].relay, 95) if base and len(base.loads) > index else None
            return (
                f"{load.errors} errors; relay p95 {_with_ratio(mine, theirs, 0)} ms; "
                f"{load.wall:.1f} s"
            )

        row(f"{sessions} sessions at once: errors; relay p95; wall", load_cell)
    if options.kill:
        row(
            "SIGKILL mid-stream: AI SDK client ends with", lambda r: r.kill.plain if r.kill else "–"
        )
        row(
            "SIGKILL: a client honouring `data-retry` ends with",
            lambda r: r.kill.reset_aware if r.kill else "–",
        )
        row(
            "SIGKILL → last event at the client",
            lambda r: _seconds(r.kill.ended_after) if r.kill else "–",
        )
    return lines


def describe(options: Options) -> str:
    tools = (
        f"{options.tool_turns} tool turns of {options.tool_calls} calls to a tool that returns "
        f"at once (Perdure: `{TOOL_AGENT}`); "
        if options.tool_turns
        else ""
    )
    kill = (
        f"; SIGKILL after {KILL_AFTER} of `@count {options.kill_count} @delay "
        f"{options.kill_delay_ms}`"
        if options.kill
        else ""
    )
    ttft = f"@ttft {options.provider_ttft_ms} " if options.provider_ttft_ms else ""
    return (
        f"{options.turns} sequential turns per system (chats of {options.turns_per_chat}) after "
        f"{options.warm_up} warm-up turns, `{ttft}@count {options.count} @delay "
        f"{options.delay_ms}`; "
        f"{tools}sessions at once: `@count {options.load_count} @delay "
        f"{options.load_delay_ms}`, one turn each{kill}; Perdure on {options.store}; "
        f"{os.cpu_count()} cores"
    )


def parse(argv: list[str] | None = None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--turns", type=int)
    parser.add_argument("--turns-per-chat", type=int)
    parser.add_argument(
        "--provider-ttft-ms", type=int, default=0, help="the fake's wait before a first delta"
    )
    parser.add_argument("--tool-turns", type=int, help="turns of tool rounds (0: none)")
    parser.add_argument("--tool-calls", type=int, help="tool calls per tool turn")
    parser.add_argument("--sessions", help="comma-separated numbers of sessions at once")
    parser.add_argument("--timeout", type=float, help="seconds an answer may take at most")
    parser.add_argument("--no-kill", action="store_true", help="skip the SIGKILL run")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--markdown", type=Path, help="write the table here too")
    parser.add_argument("--keep-logs", type=Path, help="copy every process's log here")
    args = parser.parse_args(argv)
    options = Options(
        store=args.store,
        kill=not args.no_kill,
        keep_logs=args.keep_logs,
        provider_ttft_ms=args.provider_ttft_ms,
    )
    options.systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = set(options.systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}")
    if args.quick:
        options.warm_up, options.turns, options.turns_per_chat = 1, 4, 2
        options.tool_turns, options.tool_calls = 1, 5
        options.sessions = [10]
        options.fresh_per_level = False
    if args.turns is not None:
        options.turns = args.turns
    if args.turns_per_chat is not None:
        options.turns_per_chat = args.turns_per_chat
    if args.tool_turns is not None:
        options.tool_turns = args.tool_turns
    if args.tool_calls is not None:
        options.tool_calls = args.tool_calls
    if options.tool_turns < 0 or options.tool_calls < 1:
        parser.error("--tool-turns ≥ 0, --tool-calls ≥ 1")
    if args.sessions is not None:
        options.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    if args.timeout is not None:
        options.timeout = args.timeout
    if options.store == "postgres" and (reason := postgres_available()) is not None:
        parser.error(reason)
    return options, args.markdown


async def main() -> None:
    options, markdown = parse()
    started = time.monotonic()
    results = await run(options)
    lines = table(results, options)
    note = describe(options) + f"; the run took {time.monotonic() - started:.0f} s"
    print()
    print(note)
    print("\n".join(lines))
    for result in results:
        if result.error:
            print(f"{TITLES[result.name]} failed: {result.error}")
        elif result.kill and result.kill.detail:
            print(f"{TITLES[result.name]} SIGKILL run: {result.kill.detail}")
    if markdown is not None:
        markdown.write_text(note + "\n\n" + "\n".join(lines) + "\n")
        print(f"written to {markdown}")


if __name__ == "__main__":
    asyncio.run(main())
