"""Streaming through Temporal's first-party Workflow Streams (`temporalio.contrib.workflow_streams`,
experimental in temporalio 1.35), as its LLM and chat samples build it
(temporalio/samples-python, `workflow_streams/`): one workflow per turn hosts a `WorkflowStream`;
its activity streams the provider and publishes every delta from the activity with
`WorkflowStreamClient.from_within_activity()` (batched: signals carry the batches); the gateway
subscribes (long-poll updates, by offset) and relays the items as SSE.

    python -m bench.alternatives.workflow_streams worker  --address A --task-queue Q
    python -m bench.alternatives.workflow_streams gateway --address A --task-queue Q --port P

As the samples and the library's guide set it up:
- `batch_interval` 200 ms, with the first delta force-flushed (the guide's advice for a
  prompt first token) — every batch is a signal in the turn's history;
- the subscriber's `poll_cooldown` is the library's default, 100 ms;
- a retried activity (attempt > 1) publishes a `RetryEvent` first and then the whole answer
  again; the consumer is to reset what it showed (the gateway relays it as a transient
  `data-retry` chunk);
- the activity publishes the full text on the `complete` topic, the terminator the consumer
  stops on; the workflow then holds its run open 500 ms for the last poll.
Tools as Temporal's OpenAI Agents integration runs them: every model call is an activity and
every tool call another; when the model's answer ends with tool calls, the workflow runs each as
its own activity and calls the model again with their outputs, until it answers without a call
(only that answer publishes `complete`).
The conversation is not stored anywhere else: the client sends it whole with every message (as
the AI SDK's `useChat` does) and it goes into the workflow's input. Beyond the samples, the
activity heartbeats every second with Perdure's heartbeat timeout (the samples have none, so a
dead worker would be noticed only at the 5-minute start-to-close timeout).
"""

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from temporalio import activity, workflow
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamClient
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
    lazy_client,
    provider_messages,
    serve,
    serve_worker,
    tool_output,
)

TOPIC_DELTA = "delta"
TOPIC_RETRY = "retry"
TOPIC_COMPLETE = "complete"
BATCH_INTERVAL = timedelta(milliseconds=200)
RELAY_DEADLINE = 180.0
"""Seconds the gateway keeps subscribing to one answer at most."""


@dataclass
class TurnInput:
    messages: list[Message]
    rounds: list[ToolRound] = field(default_factory=list)
    """The turn's tool rounds so far (a model call's input)."""


@dataclass
class TextDelta:
    text: str


@dataclass
class RetryEvent:
    attempt: int


@dataclass
class TextComplete:
    full_text: str


@activity.defn(name="alt_streams_stream_completion")
async def stream_completion(turn: TurnInput) -> ModelAnswer:
    beating = asyncio.create_task(heartbeat_every_second())
    try:
        stream = WorkflowStreamClient.from_within_activity(batch_interval=BATCH_INTERVAL)
        async with stream:
            deltas = stream.topic(TOPIC_DELTA, type=TextDelta)
            complete = stream.topic(TOPIC_COMPLETE, type=TextComplete)
            attempt = activity.info().attempt
            if attempt > 1:
                stream.topic(TOPIC_RETRY, type=RetryEvent).publish(
                    RetryEvent(attempt), force_flush=True
                )
            completion = Completion(chat_messages(turn.messages, turn.rounds))
            first = True
            async for text in completion.deltas():
                deltas.publish(TextDelta(text), force_flush=first)
                first = False
            answer = completion.answer()
            if not answer.tool_calls:
                complete.publish(TextComplete(answer.text))
        return answer
    finally:
        beating.cancel()


@activity.defn(name="alt_streams_run_tool")
async def run_tool(call: ToolCall) -> str:
    return await tool_output(call)


@workflow.defn(name="AltStreamTurnWorkflow", sandboxed=False)
class StreamTurnWorkflow:
    @workflow.init
    def __init__(self, turn: TurnInput) -> None:
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, turn: TurnInput) -> str:
        rounds: list[ToolRound] = []
        while True:
            answer = await workflow.execute_activity(
                stream_completion,
                TurnInput(turn.messages, rounds),
                start_to_close_timeout=STEP_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=STEP_RETRY,
            )
            if not answer.tool_calls:
                break
            outputs = await asyncio.gather(
                *(
                    workflow.execute_activity(
                        run_tool, call, start_to_close_timeout=TOOL_TIMEOUT, retry_policy=TOOL_RETRY
                    )
                    for call in answer.tool_calls
                )
            )
            rounds.append(ToolRound(answer.text, answer.tool_calls, list(outputs)))
        await workflow.sleep(timedelta(milliseconds=500))
        return answer.text


async def run_worker(address: str, task_queue: str) -> None:
    await serve_worker(
        address,
        task_queue,
        workflows=[StreamTurnWorkflow],
        activities=[stream_completion, run_tool],
    )


def create_app(address: str, task_queue: str) -> FastAPI:
    app = FastAPI()
    add_health(app)
    temporal = lazy_client(address)

    @app.post("/api/chat")
    async def chat(request: Request) -> StreamingResponse:
        body: dict[str, Any] = await request.json()
        messages = provider_messages(body["messages"])
        client = await temporal()
        workflow_id = f"alt-streams-{uuid.uuid4().hex}"
        await client.start_workflow(
            StreamTurnWorkflow.run, TurnInput(messages), id=workflow_id, task_queue=task_queue
        )
        ui = UIStream(workflow_id, workflow_id)
        converter = client.data_converter.payload_converter

        async def events() -> AsyncIterator[str]:
            yield ui.opening()
            offset = 0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + RELAY_DEADLINE
            while loop.time() < deadline:
                stream = WorkflowStreamClient.create(client, workflow_id)
                try:
                    async for item in stream.subscribe(
                        [TOPIC_DELTA, TOPIC_RETRY, TOPIC_COMPLETE],
                        from_offset=offset,
                        result_type=RawValue,
                    ):
                        offset = item.offset + 1
                        if item.topic == TOPIC_DELTA:
                            delta = converter.from_payload(item.data.payload, TextDelta)
                            yield ui.delta(delta.text)
                        elif item.topic == TOPIC_RETRY:
                            retry = converter.from_payload(item.data.payload, RetryEvent)
                            yield ui.data("retry", {"attempt": retry.attempt})
                        elif item.topic == TOPIC_COMPLETE:
                            yield ui.closing()
                            return
                    yield ui.error("the stream ended without its terminator")
                    return
                except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
                    await asyncio.sleep(0.2)  # no worker (a crash): subscribe again from here
            yield ui.error(f"no answer after {RELAY_DEADLINE:.0f} s")

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
