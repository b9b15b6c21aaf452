"""What the system survives: each fault injected while chats stream, and what their clients see
and lose.

    .venv/bin/python -m bench.faults [--runs 3] [--chats 5] [--faults worker-kill,gateway-kill,...]

Real processes (`perdure.testing.cluster`): a Temporal dev server on a SQLite file, two
`perdure worker`s on one task queue, the gateway(s), the store (SQLite, unless the fault is
the store's: PostgreSQL through a TCP proxy, or SQLite on a 16 MB tmpfs), the fake provider in
this process. A fresh cluster per fault (bench/fault_injection.py says how each is built and
injected); the fault's runs follow one another on it. The faults (`--faults`):
- `worker-kill`: SIGKILL to the worker running the first chat's step, a replacement at once;
- `gateway-kill`: SIGKILL to the gateway the clients stream from (a second one is up);
- `relay-kill`: SIGKILL to the `perdure relay` and every worker; all started again at once;
- `relay-restart`: SIGKILL to the `perdure relay` alone, the workers streaming through it; it
  starts again on its port at once;
- `temporal-restart`: SIGKILL to the Temporal server, started again 5 s later (same file, port);
- `temporal-cut`, `store-cut`: the link to Temporal, or to PostgreSQL, silent for 10 s;
- `store-restart`: every PostgreSQL connection reset and new ones refused for 5 s;
- `disk-full`: the SQLite store's 16 MB tmpfs full for 10 s (mounting it needs root);
- `provider-stall`: `@stall_after 40` on the agent `stalling` (0.5 s stall timeout);
- `provider-fail`: `@disconnect_after 40 @fail 503`, a dropped stream then a 503.
A fault whose store is not available here (PostgreSQL unreachable, not root) is skipped with
the reason.

A run: `--chats` chats each stream `@count 500 @delay 40` (20 s of answer, longer than any
fault lasts) from the first gateway. Once every chat has streamed 20 text deltas the fault is
injected; an outage is healed after its time; then every chat is read to its end. A client
whose stream breaks (an HTTP error, a closed connection, 60 s without an event) resumes with
`GET /api/chat/{id}/stream` and the last `Last-Event-ID` it saw, from the first gateway still
up, 0.2 s after each failed try. Every chat ends within 240 s of its start or is reported lost
("not ended"), and the fault's remaining runs are skipped.

Per fault:
- what the clients saw: recovery notices (`data-recovery` chunks) and the chats that saw one;
  the chats whose stream had to be reopened; HTTP errors (a status other than 200 on a resume);
- longest pause: per chat, the largest gap between two consecutive events it received, across
  reconnects; p50 and max over every chat of every run;
- heal → flowing: per run, the longest wait over its unfinished chats from the heal (for a
  killed process: the kill, its replacement being started at once) to the text delta after
  which the chat's text never again pauses more than 1 s; p50 and max over runs. None for the
  provider's faults, which have no instant the client could know;
- lost: chats whose streamed text or stored answer is not exactly `1 … 500`, whose event ids
  have a gap or a duplicate, with more than one `start`, or that did not complete
  (`CountingTurn.errors()`, `.corruption()`, `stored_answer_problems`). Target: 0.
"""

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory, gettempdir

import httpx

from bench.fault_injection import FAULTS, Fault, Rig, ready, rig_for
from bench.latency import percentile
from perdure.testing.chat_client import chat_body, user_message
from perdure.testing.cluster import CountingTurn, stored_answer_problems, wait_until
from perdure.testing.databases import postgres_available
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.small_disk import disk_unavailable

COUNT = 500
DELAY_MS = 40
INJECT_AFTER = 20
"""Text deltas every chat has streamed before the fault is injected."""
CHAT_LIMIT = 240.0
"""Seconds a chat may take from its start to its end before it counts as lost."""
FLOWING_PAUSE = 1.0
"""A stream flows again once no later pause between its text deltas exceeds this (s)."""
RETRY_PAUSE = 0.2
TIMEOUT = httpx.Timeout(60, connect=5)


@dataclass
class FaultTurn(CountingTurn):
    """A counting chat read as a client that keeps reading: when its stream breaks it resumes
    from the last event id it saw, through the first gateway of `gateways` (the rig's own list,
    from which a killed gateway is taken out)."""

    directives: str = ""
    gateways: list[str] = field(default_factory=list)
    submission: str = ""
    reconnects: int = 0
    http_errors: list[str] = field(default_factory=list)

    @property
    def user_text(self) -> str:
        return f"{super().user_text} {self.directives}".rstrip()

    async def follow(self) -> None:
        """Start the chat and read it to its end, reconnecting as often as it must."""
        try:
            async with asyncio.timeout(CHAT_LIMIT):
                await self._start()
                while self.submission and not self.stream.done:
                    self.reconnects += 1
                    await asyncio.sleep(RETRY_PAUSE)
                    await self._resume()
        except TimeoutError:
            self.failure = f"not ended {CHAT_LIMIT:.0f} s after its start"

    async def _start(self) -> None:
        extra = {"agent": self.agent} if self.agent else {}
        body = chat_body(self.session, user_message(self.user_text), **extra)
        self.posted_at = time.monotonic()
        try:
            async with (
                httpx.AsyncClient(base_url=self.gateways[0], timeout=TIMEOUT) as http,
                http.stream("POST", "/api/chat", json=body) as response,
            ):
                if response.status_code != 200:
                    await response.aread()
                    self.failure = f"HTTP {response.status_code}: {response.text[:200]}"
                    return
                self.submission = response.headers["x-perdure-submission-id"]
                await self.stream.read(response)
        except httpx.HTTPError as error:
            if not self.submission:
                self.failure = f"{type(error).__name__}: {error}"

    async def _resume(self) -> None:
        last = self.stream.events[-1][0] if self.stream.events else None
        headers = {} if last is None else {"Last-Event-ID": f"{self.submission}:{last}"}
        path = f"/api/chat/{self.session}/stream"
        try:
            async with (
                httpx.AsyncClient(base_url=self.gateways[0], timeout=TIMEOUT) as http,
                http.stream("GET", path, headers=headers) as response,
            ):
                if response.status_code != 200:
                    await response.aread()
                    self.http_errors.append(f"HTTP {response.status_code}")
                    return
                await self.stream.read(response)
        except httpx.HTTPError:
            pass  # refused, reset or silent: the next try says more


@dataclass(frozen=True)
class ChatOutcome:
    session: str
    ended: bool
    notices: int
    reconnects: int
    http_errors: list[str]
    longest_pause: float
    problems: list[str]


@dataclass
class FaultResult:
    fault: Fault
    chats: list[ChatOutcome] = field(default_factory=list)
    flowing: list[float] = field(default_factory=list)
    """Per run: heal (or kill) → every unfinished chat flowing again (s)."""
    runs: int = 0
    note: str = ""
    """Why the fault was skipped, or its runs ended early."""


def longest_pause(turn: CountingTurn) -> float:
    times = turn.stream.received_at
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def flowing_after(turn: CountingTurn, healed: float) -> float | None:
    """Healed → the text delta after which the chat's text never pauses more than
    `FLOWING_PAUSE` again; None when no text came after the heal."""
    times = [
        at
        for (_, chunk), at in zip(turn.stream.events, turn.stream.received_at, strict=True)
        if chunk["type"] == "text-delta"
    ]
    after = [at for at in times if at >= healed]
    if not after:
        return None
    flowing = after[0]
    for previous, current in zip(times, times[1:], strict=False):
        if current >= healed and current - previous > FLOWING_PAUSE:
            flowing = current
    return flowing - healed


async def outcome(http: httpx.AsyncClient, turn: FaultTurn) -> ChatOutcome:
    problems = turn.errors() + turn.corruption()
    if turn.stream.done:
        problems += await stored_answer_problems(http, turn)
    return ChatOutcome(
        session=turn.session,
        ended=turn.stream.done,
        notices=len(turn.recoveries()),
        reconnects=turn.reconnects,
        http_errors=turn.http_errors,
        longest_pause=longest_pause(turn),
        problems=problems,
    )


async def injected(rig: Rig, fault: Fault, turns: list[FaultTurn]) -> float | None:
    """Once every chat has streamed `INJECT_AFTER` deltas: the fault, and when it healed."""
    try:
        await wait_until(lambda: all(t.stream.deltas() >= INJECT_AFTER for t in turns), 60)
    except AssertionError:
        raise AssertionError(f"the chats did not reach {INJECT_AFTER} deltas in 60 s") from None
    return await asyncio.wait_for(fault.inject(rig, turns), timeout=120)


async def one_run(rig: Rig, fault: Fault, chats: int) -> tuple[list[ChatOutcome], float | None]:
    """One run of the fault: its chats' outcomes and heal → every chat flowing again."""
    await ready(rig, fault)
    tag = uuid.uuid4().hex[:6]
    turns = [
        FaultTurn(
            f"{fault.name}-{tag}-{n}",
            COUNT,
            DELAY_MS,
            agent=fault.agent,
            directives=fault.directives,
            gateways=rig.gateways,
        )
        for n in range(chats)
    ]
    reading = asyncio.gather(*(turn.follow() for turn in turns))
    try:
        healed = await injected(rig, fault, turns)
    except BaseException:
        reading.cancel()
        raise
    await reading
    flowing = [] if healed is None else [flowing_after(turn, healed) for turn in turns]
    async with httpx.AsyncClient(base_url=rig.gateways[0], timeout=30) as http:
        outcomes = [await outcome(http, turn) for turn in turns]
    measured = [seconds for seconds in flowing if seconds is not None]
    return outcomes, max(measured) if measured else None


def keep_logs(rig: Rig, fault: Fault, run: int) -> Path:
    path = Path(gettempdir()) / f"perdure-faults-{fault.name}-{run}-{uuid.uuid4().hex[:6]}.log"
    path.write_text(rig.cluster.logs())
    return path


async def fault_runs(fault: Fault, runs: int, chats: int, fake: FakeProvider) -> FaultResult:
    result = FaultResult(fault)
    with TemporaryDirectory() as tmp:
        async with rig_for(fault, Path(tmp), fake) as rig:
            for number in range(1, runs + 1):
                try:
                    outcomes, flowing = await one_run(rig, fault, chats)
                except (AssertionError, TimeoutError, httpx.HTTPError) as error:
                    result.note = f"run {number} ended: {error or 'a timeout'}; logs in "
                    result.note += str(keep_logs(rig, fault, number))
                    break
                result.runs += 1
                result.chats += outcomes
                result.flowing += [] if flowing is None else [flowing]
                report(fault, number, outcomes, flowing)
                if any(chat.problems for chat in outcomes):
                    print(f"  logs: {keep_logs(rig, fault, number)}", flush=True)
                if not all(chat.ended for chat in outcomes):
                    result.note = f"run {number}: chats never ended; the fault's other runs skipped"
                    break
    return result


def report(fault: Fault, number: int, outcomes: list[ChatOutcome], flowing: float | None) -> None:
    pauses = ", ".join(f"{chat.longest_pause:.2f}" for chat in outcomes)
    since = "heal" if fault.outage else "kill"
    healed = "" if flowing is None else f"; flowing again {flowing:.2f} s after the {since}"
    print(
        f"{fault.name} {number}: {sum(c.notices for c in outcomes)} recovery notices, "
        f"{sum(c.reconnects for c in outcomes)} reconnect tries, longest pauses {pauses} s{healed}",
        flush=True,
    )
    for chat in outcomes:
        if chat.problems:
            print(f"  LOST {chat.session}: {chat.problems}", flush=True)


def why_skipped(fault: Fault) -> str | None:
    if fault.store == "postgres":
        return postgres_available()
    if fault.store == "tmpfs":
        return disk_unavailable()
    return None


def p50_max(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{percentile(values, 50):.2f} / {max(values):.2f}"


def seen(chats: list[ChatOutcome]) -> str:
    notices = sum(chat.notices for chat in chats)
    noticed = sum(1 for chat in chats if chat.notices)
    reconnected = sum(1 for chat in chats if chat.reconnects)
    errors = sorted({error for chat in chats for error in chat.http_errors})
    parts = [
        f"{notices} recovery notices ({noticed}/{len(chats)} chats)" if notices else "",
        f"{reconnected}/{len(chats)} streams reconnected" if reconnected else "",
        f"HTTP errors: {', '.join(errors)}" if errors else "",
    ]
    return "; ".join(part for part in parts if part) or "nothing"


def lost(result: FaultResult, chats: int) -> str:
    broken = [chat for chat in result.chats if chat.problems]
    if not broken:
        return f"nothing in {result.runs} runs × {chats} chats"
    kinds = sorted({problem.split(":")[0] for chat in broken for problem in chat.problems})
    return f"**{len(broken)} of {len(result.chats)} chats**: {'; '.join(kinds)}"


def table(results: list[FaultResult], chats: int) -> list[str]:
    lines = [
        "| fault | what the client sees | longest pause (s) p50 / max "
        "| heal → flowing (s) p50 / max | lost |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        if not result.runs:
            lines.append(f"| `{result.fault.name}` | not run: {result.note} | – | – | – |")
            continue
        pauses = [chat.longest_pause for chat in result.chats]
        flowing = p50_max(result.flowing)
        if flowing != "–" and not result.fault.outage:
            flowing += " (from the kill)"
        lines.append(
            f"| `{result.fault.name}` | {seen(result.chats)} | {p50_max(pauses)} "
            f"| {flowing} | {lost(result, chats)} |"
        )
    return lines + [f"{r.fault.name}: {r.note}" for r in results if r.note and r.runs]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per fault")
    parser.add_argument("--chats", type=int, default=5, help="chats mid-answer in every run")
    parser.add_argument("--faults", default=",".join(fault.name for fault in FAULTS))
    args = parser.parse_args()
    by_name = {fault.name: fault for fault in FAULTS}
    names = [name.strip() for name in args.faults.split(",") if name.strip()]
    if unknown := sorted(set(names) - set(by_name)):
        parser.error(f"unknown fault {unknown}; known: {', '.join(by_name)}")
    started = time.monotonic()
    results: list[FaultResult] = []
    with FakeProvider() as fake:
        for fault in (by_name[name] for name in names):
            if (reason := why_skipped(fault)) is not None:
                print(f"{fault.name} skipped: {reason}", flush=True)
                results.append(FaultResult(fault, note=f"skipped: {reason}"))
                continue
            results.append(await fault_runs(fault, args.runs, args.chats, fake))
    print()
    print(
        f"{args.runs} runs × {args.chats} chats per fault, each `@count {COUNT} @delay "
        f"{DELAY_MS}`, the fault injected after {INJECT_AFTER} deltas; "
        f"took {time.monotonic() - started:.0f} s"
    )
    print("\n".join(table(results, args.chats)))


if __name__ == "__main__":
    asyncio.run(main())
