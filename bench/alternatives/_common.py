"""What the alternatives of `bench.compare` share, so that they differ only in their design:
the provider call and the one tool it offers (`wait`), the AI SDK UI message stream they serve,
the Temporal worker's tuning (the same as `perdure worker`'s), and their processes (each its
own, so a worker can be SIGKILLed).

Nothing here knows Perdure: the alternatives are written as their users would write them, with
the Temporal SDK, FastAPI and the OpenAI SDK only.
"""

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import uvicorn
from fastapi import FastAPI
from openai import AsyncOpenAI
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)
from temporalio import activity
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import PollerBehaviorAutoscaling, Worker

REPO = Path(__file__).parents[2]
MODEL = "gpt-bench"

# The worker tuning of `perdure worker` (runtime/worker.py) and the retry and heartbeat policy of
# its model step (workflows/_policies.py), given to every alternative alike.
MAX_CONCURRENT_ACTIVITIES = 1000
POLLERS_MAX = 20
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
HEARTBEAT_EVERY = 1.0
STEP_TIMEOUT = timedelta(minutes=10)
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)


async def serve_worker(
    address: str, task_queue: str, *, workflows: Sequence[type], activities: Sequence[Any]
) -> None:
    """A Temporal worker tuned as `perdure worker` is, until SIGTERM/SIGINT; it prints
    `WORKER_READY` once it polls."""
    client = await Client.connect(address)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=activities,
        max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(maximum=POLLERS_MAX),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(maximum=POLLERS_MAX),
        max_heartbeat_throttle_interval=timedelta(milliseconds=500),
        default_heartbeat_throttle_interval=timedelta(milliseconds=500),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    async with worker:
        print(WORKER_READY, flush=True)
        await stopping.wait()


def lazy_client(address: str) -> Callable[[], Awaitable[Client]]:
    """The gateway's Temporal client, connected on first use (in the server's event loop)."""
    clients: list[Client] = []

    async def temporal() -> Client:
        if not clients:
            clients.append(await Client.connect(address))
        return clients[0]

    return temporal


# -- the provider ------------------------------------------------------------------------------

_provider: AsyncOpenAI | None = None


def provider() -> AsyncOpenAI:
    """One OpenAI client per process (`OPENAI_BASE_URL` points it at the fake provider); its own
    retries off, as Perdure's are: a retry is Temporal's business (or, for the floor, nobody's)."""
    global _provider
    if _provider is None:
        _provider = AsyncOpenAI(max_retries=0, timeout=600.0)
    return _provider


@dataclass
class Message:
    """A message of the conversation: the user's or the model's text."""

    role: str
    content: str


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str
    """JSON, as the model wrote it."""


@dataclass
class ToolRound:
    """A model answer that called tools, and each call's output: one round of a turn."""

    text: str
    calls: list[ToolCall]
    outputs: list[str]


@dataclass
class ModelAnswer:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Empty when the answer is the turn's last."""


WAIT = "wait"
TOOLS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": WAIT,
            "description": "Wait, then answer.",
            "parameters": {
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
                "required": ["seconds"],
            },
        },
    }
]
"""What every request offers the model: the tool `bench.tool_rounds` has it call (Perdure's
test agents have it too), so that the designs' tool rounds compare."""

TOOL_TIMEOUT = timedelta(minutes=10)
TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)
"""Perdure's policy for an idempotent tool (workflows/_policies.py)."""


async def wait(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"waited {seconds} s"


async def tool_output(call: ToolCall) -> str:
    """Run the tool a call names with the arguments the model gave it."""
    if call.name != WAIT:
        return f"Error: no tool named {call.name!r}"
    arguments = json.loads(call.arguments or "{}")
    return await wait(float(arguments["seconds"]))


def chat_messages(
    conversation: list[Message], rounds: Sequence[ToolRound] = ()
) -> list[ChatCompletionMessageParam]:
    """The conversation, then the turn's tool rounds so far, as Chat Completions messages: each
    round the model's answer with its `tool_calls`, then one `tool` message per call."""
    messages = [
        cast(ChatCompletionMessageParam, {"role": m.role, "content": m.content})
        for m in conversation
    ]
    for round_ in rounds:
        answer: ChatCompletionAssistantMessageParam = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in round_.calls
            ],
        }
        if round_.text:
            answer["content"] = round_.text
        messages.append(answer)
        for call, output in zip(round_.calls, round_.outputs, strict=True):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return messages


class Completion:
    """One streamed Chat Completions answer, `TOOLS` offered: `deltas()` yields its text as it
    comes; then `answer()` holds the text and the tool calls it ended with, each assembled from
    its fragments (its id and name first, then its arguments in pieces)."""

    def __init__(self, messages: list[ChatCompletionMessageParam]) -> None:
        self._messages = messages
        self._text: list[str] = []
        self._calls: dict[int, ToolCall] = {}

    async def deltas(self) -> AsyncIterator[str]:
        stream = await provider().chat.completions.create(
            model=MODEL, messages=self._messages, tools=TOOLS, stream=True
        )
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                self._text.append(delta.content)
                yield delta.content
            for fragment in delta.tool_calls or []:
                call = self._calls.setdefault(fragment.index, ToolCall("", "", ""))
                call.id = fragment.id or call.id
                if fragment.function is not None:
                    call.name = fragment.function.name or call.name
                    call.arguments += fragment.function.arguments or ""

    def answer(self) -> ModelAnswer:
        return ModelAnswer("".join(self._text), [self._calls[i] for i in sorted(self._calls)])


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message of an AI SDK `messages` list."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return "".join(
                p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text"
            )
    raise ValueError("no user message")


def provider_messages(messages: list[dict[str, Any]]) -> list[Message]:
    """AI SDK UI messages → the conversation (text parts only)."""
    return [
        Message(
            message["role"],
            "".join(
                part.get("text", "")
                for part in message.get("parts", [])
                if part.get("type") == "text"
            ),
        )
        for message in messages
        if message.get("role") in ("user", "assistant")
    ]


async def heartbeat_every_second() -> None:
    """Run beside a streaming activity, as Perdure's model step does: liveness for Temporal."""
    while True:
        await asyncio.sleep(HEARTBEAT_EVERY)
        activity.heartbeat()


# -- the AI SDK UI message stream --------------------------------------------------------------

SSE_HEADERS = {
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
DONE = "data: [DONE]\n\n"
TEXT_ID = "text-0"


def sse(stream_id: str, seq: int, chunk: dict[str, Any]) -> str:
    """One SSE event, `id: <stream>:<seq>` as Perdure's gateway numbers them."""
    return f"id: {stream_id}:{seq}\ndata: {json.dumps(chunk, separators=(',', ':'))}\n\n"


class UIStream:
    """Numbers the chunks of one answer: `start`, `text-start`, the deltas, `text-end`,
    `finish` — the AI SDK UI message stream protocol, the one Perdure's gateway speaks."""

    def __init__(self, stream_id: str, message_id: str) -> None:
        self.stream_id = stream_id
        self.message_id = message_id
        self.seq = 0

    def _next(self, chunk: dict[str, Any]) -> str:
        event = sse(self.stream_id, self.seq, chunk)
        self.seq += 1
        return event

    def opening(self) -> str:
        return self._next({"type": "start", "messageId": self.message_id}) + self._next(
            {"type": "text-start", "id": TEXT_ID}
        )

    def delta(self, text: str) -> str:
        return self._next({"type": "text-delta", "id": TEXT_ID, "delta": text})

    def data(self, name: str, value: dict[str, Any]) -> str:
        return self._next({"type": f"data-{name}", "data": value, "transient": True})

    def closing(self) -> str:
        return (
            self._next({"type": "text-end", "id": TEXT_ID}) + self._next({"type": "finish"}) + DONE
        )

    def error(self, text: str) -> str:
        return self._next({"type": "error", "errorText": text}) + DONE


def add_health(app: FastAPI) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}


def serve(app: FastAPI, port: int) -> None:
    """Serve the gateway on 127.0.0.1:`port` until SIGTERM."""
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )


# -- processes ---------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child: a benchmark killed abruptly leaves no stray process behind."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class AltProcess:
    """`python -m <module> <args>` in a process group of its own, output to a log file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> "AltProcess":
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed by the child's exit
        self.process = subprocess.Popen(
            [sys.executable, *self.args],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole group: no cleanup at all, like a crashed machine."""
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if not self.alive():
            return
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def wait_for_line(self, text: str, timeout: float = 60) -> None:
        """Until the process's output holds `text` (bounded)."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if not self.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no {text!r} after {timeout} s")
            await asyncio.sleep(0.05)


async def wait_healthy(url: str, process: AltProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while time.monotonic() < deadline:
            if not process.alive():
                raise RuntimeError(f"{process.name} exited:\n{process.output()[-3000:]}")
            with contextlib.suppress(httpx.TransportError):
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} not healthy after {timeout} s:\n{process.output()[-3000:]}")


WORKER_READY = "ALT_WORKER_READY"
"""Printed by an alternative's worker once it polls."""
