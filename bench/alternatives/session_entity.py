"""The session entity design: one long-lived `SessionWorkflow` per chat holds the transcript;
each message submitted to it (an update, with update-with-start for a chat's first) becomes a
child `SessionTurnWorkflow`, whose activity streams the provider and pushes the chunks back to
the session workflow by signals, batched; the gateway long-polls the session workflow with an
update that waits for chunks after an offset, and relays them as SSE.

    python -m bench.alternatives.session_entity worker  --address A --task-queue Q
    python -m bench.alternatives.session_entity gateway --address A --task-queue Q --port P

What the design costs, by construction:
- the transcript lives in the workflow, so every turn's activity input carries the whole
  conversation, and the session's history grows with every turn (the chunk signals and the
  polling updates of each turn land in the *session's* history): it must continue-as-new
  once Temporal suggests it, carrying the transcript along;
- a message reaches the provider through two workflows: the session's task (the update),
  then the child's start, its first task, and the activity.

Chunk batching as the Workflow Streams samples do it: the first delta goes at once, then at most
one signal per 200 ms carries what the provider produced since (every signal is a history event
of the session and a workflow task: a signal per delta, or per round trip, floods the server
with a few hundred streaming turns). A retried activity (attempt > 1) starts the answer over; its first batch carries the new
attempt number, and the session records a `retry` event the gateway relays as a transient
`data-retry` chunk, so a client that knows it can discard what it showed (the pattern of the
Workflow Streams samples' `RetryEvent`); batches of an older attempt are dropped.

Tools: when the model's answer ends with tool calls, the turn workflow runs each as its own
activity and calls the model activity again with their outputs, until it answers without a call
(each model call an activity, each tool call another, as Temporal's OpenAI Agents integration
runs them); the session's transcript keeps the turn's last answer.
"""

import argparse
import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from temporalio import activity, workflow
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from bench.alternatives._common import (
    HEARTBEAT_TIMEOUT,
    SSE_HEADERS,
    STEP_RETRY,
    STEP_TIMEOUT,
    TOOL_RETRY,
    TOOL_TIMEOUT,
    Completion,
    Message,
    ModelAnswer,
    ToolCall,
    ToolRound,
    UIStream,
    add_health,
    chat_messages,
    heartbeat_every_second,
    last_user_text,
    lazy_client,
    serve,
    serve_worker,
    tool_output,
)

BATCH_INTERVAL = timedelta(milliseconds=200)
"""At most one chunk signal per turn this often (after the first delta, sent at once): the
batching of the Workflow Streams samples, so the two Temporal designs batch alike."""
IDLE_TIMEOUT = timedelta(minutes=10)
"""A session with nothing to do for this long ends (its transcript in its result)."""
KEEP_LIVE_TURNS = 2
"""The live chunks of this many recent turns stay in the session's state (older ones go)."""
POLL_DEADLINE = 180.0
"""Seconds the gateway keeps polling one answer at most."""


@dataclass
class SessionInput:
    session_id: str
    transcript: list[Message] = field(default_factory=list)
    next_turn: int = 0


@dataclass
class TurnInput:
    session_workflow_id: str
    turn: int
    messages: list[Message]
    rounds: list[ToolRound] = field(default_factory=list)
    """The turn's tool rounds so far (a model call's input)."""


@dataclass
class ChunkBatch:
    turn: int
    step: int
    """The turn's model call (0, then one more after each tool round)."""
    attempt: int
    batch: int
    deltas: list[str]


@dataclass
class LiveEvent:
    kind: str
    """`delta` or `retry`."""
    text: str = ""
    attempt: int = 0


@dataclass
class PollRequest:
    turn: int
    after: int


@dataclass
class PollResult:
    events: list[LiveEvent]
    next: int
    done: bool


def session_workflow_id(chat_id: str) -> str:
    return f"alt-session-{chat_id}"


def turn_workflow_id(session_workflow: str, turn: int) -> str:
    return f"{session_workflow}-turn-{turn}"


# -- the activity --------------------------------------------------------------------------------


class _Batcher:
    """Signals a turn's deltas to the session workflow: the first at once, then what arrived
    since, at most one signal per `BATCH_INTERVAL` (and the rest when the answer ends)."""

    def __init__(
        self, client: Client, workflow_id: str, turn: int, step: int, attempt: int
    ) -> None:
        self._handle = client.get_workflow_handle(workflow_id)
        self._turn = turn
        self._step = step
        self._attempt = attempt
        self._buffer: list[str] = []
        self._batch = 0
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self._closing = False
        self._task = asyncio.create_task(self._run())

    def add(self, text: str) -> None:
        self._buffer.append(text)
        self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        sent_at: float | None = None
        while True:
            await self._wake.wait()
            if sent_at is not None and not self._closing:
                pause = sent_at + BATCH_INTERVAL.total_seconds() - loop.time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), timeout=max(0.0, pause))
            self._wake.clear()
            if self._buffer:
                deltas, self._buffer = self._buffer, []
                self._batch += 1
                sent_at = loop.time()
                await self._handle.signal(
                    SessionWorkflow.chunks,
                    ChunkBatch(self._turn, self._step, self._attempt, self._batch, deltas),
                )
            if self._closing and not self._buffer:
                return

    async def close(self) -> None:
        """Flush everything, then stop (raises what a signal raised)."""
        self._closing = True
        self._closed.set()
        self._wake.set()
        await self._task

    def cancel(self) -> None:
        self._task.cancel()


@activity.defn(name="alt_session_stream_reply")
async def stream_reply(turn: TurnInput) -> ModelAnswer:
    """Stream the provider's answer to the conversation, signalling the deltas to the session."""
    beating = asyncio.create_task(heartbeat_every_second())
    batcher = _Batcher(
        activity.client(),
        turn.session_workflow_id,
        turn.turn,
        len(turn.rounds),
        activity.info().attempt,
    )
    try:
        completion = Completion(chat_messages(turn.messages, turn.rounds))
        async for text in completion.deltas():
            batcher.add(text)
        await batcher.close()
        return completion.answer()
    finally:
        batcher.cancel()
        beating.cancel()


@activity.defn(name="alt_session_run_tool")
async def run_tool(call: ToolCall) -> str:
    return await tool_output(call)


# -- the workflows -------------------------------------------------------------------------------


@workflow.defn(name="AltSessionTurnWorkflow", sandboxed=False)
class SessionTurnWorkflow:
    """One turn: the streaming activity, and a tool activity per call while the model calls
    tools; its last answer returned to the session."""

    @workflow.run
    async def run(self, turn: TurnInput) -> str:
        rounds: list[ToolRound] = []
        while True:
            answer = await workflow.execute_activity(
                stream_reply,
                replace(turn, rounds=rounds),
                start_to_close_timeout=STEP_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=STEP_RETRY,
            )
            if not answer.tool_calls:
                return answer.text
            outputs = await asyncio.gather(
                *(
                    workflow.execute_activity(
                        run_tool, call, start_to_close_timeout=TOOL_TIMEOUT, retry_policy=TOOL_RETRY
                    )
                    for call in answer.tool_calls
                )
            )
            rounds.append(ToolRound(answer.text, answer.tool_calls, list(outputs)))


@workflow.defn(name="AltSessionWorkflow", sandboxed=False)
class SessionWorkflow:
    @workflow.init
    def __init__(self, start: SessionInput) -> None:
        self.transcript = list(start.transcript)
        self.next_turn = start.next_turn
        self.pending: deque[tuple[int, str]] = deque()
        self.live: dict[int, list[LiveEvent]] = {}
        self.attempts: dict[tuple[int, int], int] = {}
        """(turn, step) → the attempt of that model call whose chunks are kept."""
        self.batches: dict[tuple[int, int], int] = {}
        self.done: set[int] = set()

    @workflow.run
    async def run(self, start: SessionInput) -> list[Message]:
        while True:
            try:
                await workflow.wait_condition(lambda: bool(self.pending), timeout=IDLE_TIMEOUT)
            except TimeoutError:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self.transcript
            turn, text = self.pending.popleft()
            self.transcript.append(Message("user", text))
            answer = await workflow.execute_child_workflow(
                SessionTurnWorkflow.run,
                TurnInput(workflow.info().workflow_id, turn, list(self.transcript)),
                id=turn_workflow_id(workflow.info().workflow_id, turn),
            )
            self.transcript.append(Message("assistant", answer))
            self.done.add(turn)
            for old in [t for t in self.live if t <= turn - KEEP_LIVE_TURNS]:
                del self.live[old]
            if not self.pending and workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    SessionInput(start.session_id, self.transcript, self.next_turn)
                )

    @workflow.update
    async def submit(self, text: str) -> int:
        """Queue a user message; its turn number (answered FIFO)."""
        turn = self.next_turn
        self.next_turn += 1
        self.live[turn] = []
        self.pending.append((turn, text))
        return turn

    @workflow.signal
    def chunks(self, batch: ChunkBatch) -> None:
        live = self.live.get(batch.turn)
        if live is None or batch.turn in self.done:
            return
        call = (batch.turn, batch.step)
        current = self.attempts.get(call, 1)
        if batch.attempt < current:
            return  # a superseded attempt
        if batch.attempt > current:
            self.attempts[call] = batch.attempt
            self.batches[call] = 0
            live.append(LiveEvent("retry", attempt=batch.attempt))
        if batch.batch <= self.batches.get(call, 0):
            return  # a signal delivered twice
        self.batches[call] = batch.batch
        live.extend(LiveEvent("delta", text) for text in batch.deltas)

    @workflow.update
    async def poll(self, request: PollRequest) -> PollResult:
        """Wait for the turn's events after `after` (or its end)."""
        await workflow.wait_condition(
            lambda: (
                request.turn not in self.live
                or len(self.live[request.turn]) > request.after
                or request.turn in self.done
            )
        )
        events = self.live.get(request.turn, [])[request.after :]
        return PollResult(events, request.after + len(events), request.turn in self.done)

    @workflow.query
    def messages(self) -> list[Message]:
        return self.transcript


# -- the processes -------------------------------------------------------------------------------


async def run_worker(address: str, task_queue: str) -> None:
    await serve_worker(
        address,
        task_queue,
        workflows=[SessionWorkflow, SessionTurnWorkflow],
        activities=[stream_reply, run_tool],
    )


def create_app(address: str, task_queue: str) -> FastAPI:
    app = FastAPI()
    add_health(app)
    temporal = lazy_client(address)

    @app.post("/api/chat")
    async def chat(request: Request) -> StreamingResponse:
        body: dict[str, Any] = await request.json()
        chat_id = str(body["id"])
        text = last_user_text(body["messages"])  # the session holds the rest
        client = await temporal()
        workflow_id = session_workflow_id(chat_id)
        turn: int = await client.execute_update_with_start_workflow(
            SessionWorkflow.submit,
            text,
            start_workflow_operation=WithStartWorkflowOperation(
                SessionWorkflow.run,
                SessionInput(chat_id),
                id=workflow_id,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                task_queue=task_queue,
            ),
        )
        ui = UIStream(str(turn), turn_workflow_id(workflow_id, turn))
        handle = client.get_workflow_handle(workflow_id)

        async def events() -> AsyncIterator[str]:
            yield ui.opening()
            after = 0
            deadline = asyncio.get_running_loop().time() + POLL_DEADLINE
            while asyncio.get_running_loop().time() < deadline:
                try:
                    result = await handle.execute_update(
                        SessionWorkflow.poll, PollRequest(turn, after), id=uuid.uuid4().hex
                    )
                except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
                    await asyncio.sleep(0.2)  # no worker yet (a crash): poll again
                    continue
                for event in result.events:
                    if event.kind == "retry":
                        yield ui.data("retry", {"attempt": event.attempt})
                    else:
                        yield ui.delta(event.text)
                after = result.next
                if result.done:
                    yield ui.closing()
                    return
            yield ui.error(f"no answer after {POLL_DEADLINE:.0f} s")

        return StreamingResponse(events(), media_type="text/event-stream", headers=SSE_HEADERS)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["worker", "gateway"])
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.role == "worker":
        asyncio.run(run_worker(args.address, args.task_queue))
    else:
        serve(create_app(args.address, args.task_queue), args.port)


if __name__ == "__main__":
    main()
