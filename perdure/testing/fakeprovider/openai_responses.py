"""The OpenAI Responses API: streaming, background mode, re-attach by cursor, cancel.

A response's events and their due times are fixed when it is created, so generation
"continues server-side" while no client listens: `GET /v1/responses/{id}?stream=true
&starting_after=N` plays the events after N, the overdue ones at once
(https://developers.openai.com/api/docs/guides/background, "Streaming a background response").

As the real API (`rules.py`): unknown parameters and `function_call`s without output are
refused; background mode needs `store`; a trailing assistant message is not continued (the
answer starts afresh), while a partial followed by the continue instruction is answered by a
model that follows it. `POST /v1/responses/{id}/cancel` works only for background responses
("Only responses created with the background parameter set to true can be cancelled",
https://developers.openai.com/api/reference/resources/responses/methods/cancel); it answers the
response object with status `cancelled`, and "Cancelling twice is idempotent - subsequent calls
simply return the final Response object" (the background guide). A cancelled response's
streams end, and so do re-attaches to it.
"""

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from perdure.testing.fakeprovider import rules
from perdure.testing.fakeprovider.anthropic import THINKING, THOUGHT_TOKENS
from perdure.testing.fakeprovider.directives import Fault, parse
from perdure.testing.fakeprovider.gate import Rejection, screen
from perdure.testing.fakeprovider.openai_common import openai_error, openai_stream_fault
from perdure.testing.fakeprovider.player import Frame, FrameStream, schedule, sse
from perdure.testing.fakeprovider.script import Continuing, Plan, make_plan, words
from perdure.testing.fakeprovider.state import FakeState
from perdure.testing.fakeprovider.transcript import from_responses

Event = dict[str, Any]

SYNCHRONOUS_CANCEL = "Cannot cancel a synchronous response."
"""The refusal for a response not created in background mode, as OpenAI-compatible servers word
it (vLLM and SGLang `cancel_responses`); OpenAI documents the rule, not its message."""


def _usage(plan: Plan, reasoning_tokens: int) -> dict[str, Any]:
    """The response's `usage`: `input_tokens` counts the cached ones too, `output_tokens` the
    reasoning ones (https://developers.openai.com/api/reference/resources/responses/streaming-events,
    the Response object's `usage`; https://developers.openai.com/api/docs/guides/prompt-caching;
    https://developers.openai.com/api/docs/guides/reasoning)."""
    output_tokens = plan.output_tokens + reasoning_tokens
    return {
        "input_tokens": plan.input_tokens,
        "input_tokens_details": {
            "cached_tokens": plan.cached_input_tokens,
            "cache_write_tokens": 0,
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": plan.input_tokens + output_tokens,
    }


class _Builder:
    """Builds the event list of one response, numbering nothing yet."""

    def __init__(self, response_id: str, body: dict[str, Any]) -> None:
        self.response_id = response_id
        self.body = body
        self.created_at = int(time.time())
        self.events: list[tuple[Event, bool]] = []
        self.output: list[dict[str, Any]] = []

    def response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": bool(self.body.get("background")),
            "error": None,
            "incomplete_details": None,
            "instructions": self.body.get("instructions"),
            "max_output_tokens": self.body.get("max_output_tokens"),
            "metadata": {},
            "model": str(self.body.get("model", "")),
            "output": list(self.output),
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": self.body.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": self.body.get("tools") or [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            **extra,
        }

    def emit(self, event_type: str, *, is_delta: bool = False, **fields: Any) -> None:
        self.events.append(({"type": event_type, **fields}, is_delta))

    def reasoning(self, summary: bool) -> None:
        """A reasoning item, as a reasoning model streams it: its summary only when asked for
        (`reasoning.summary`); its content stays at OpenAI (the response is stored)."""
        index, item_id = len(self.output), f"rs_{uuid.uuid4().hex[:24]}"
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        self.emit("response.output_item.added", output_index=index, item=item)
        summaries: list[dict[str, Any]] = []
        if summary:
            where: dict[str, Any] = {"item_id": item_id, "output_index": index, "summary_index": 0}
            empty = {"type": "summary_text", "text": ""}
            self.emit("response.reasoning_summary_part.added", part=empty, **where)
            for text in words(THINKING):
                self.emit("response.reasoning_summary_text.delta", delta=text, **where)
            self.emit("response.reasoning_summary_text.done", text=THINKING, **where)
            summaries = [{"type": "summary_text", "text": THINKING}]
            self.emit("response.reasoning_summary_part.done", part=summaries[0], **where)
        done = {**item, "summary": summaries}
        self.emit("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def message(self, chunks: list[str], complete: bool) -> None:
        index, item_id = len(self.output), f"msg_{uuid.uuid4().hex[:24]}"
        where: dict[str, Any] = {"item_id": item_id, "output_index": index, "content_index": 0}
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        self.emit("response.output_item.added", output_index=index, item=item)
        empty = {"type": "output_text", "text": "", "annotations": []}
        self.emit("response.content_part.added", part=empty, **where)
        for text in chunks:
            self.emit("response.output_text.delta", is_delta=True, delta=text, logprobs=[], **where)
        text = "".join(chunks)
        self.emit("response.output_text.done", text=text, logprobs=[], **where)
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        self.emit("response.content_part.done", part=part, **where)
        status = "completed" if complete else "incomplete"
        done = {**item, "status": status, "content": [part]}
        self.emit("response.output_item.done", output_index=index, item=done)
        self.output.append(done)

    def function_call(self, key: str, name: str, chunks: list[str]) -> None:
        index, item_id = len(self.output), f"fc_{key}"
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "call_id": f"call_{key}",
            "name": name,
            "arguments": "",
        }
        self.emit("response.output_item.added", output_index=index, item=item)
        for part in chunks:
            self.emit(
                "response.function_call_arguments.delta",
                is_delta=True,
                item_id=item_id,
                output_index=index,
                delta=part,
            )
        arguments = "".join(chunks)
        where: dict[str, Any] = {"item_id": item_id, "output_index": index}
        self.emit("response.function_call_arguments.done", arguments=arguments, name=name, **where)
        done = {**item, "status": "completed", "arguments": arguments}
        self.emit("response.output_item.done", output_index=index, item=done)
        self.output.append(done)


def response_events(plan: Plan, response_id: str, body: dict[str, Any]) -> list[tuple[Event, bool]]:
    """Every event of the response in order, each with whether it is a content delta."""
    build = _Builder(response_id, body)
    first = "queued" if body.get("background") else "in_progress"
    build.emit("response.created", response=build.response(first))
    build.emit("response.in_progress", response=build.response("in_progress"))
    reasoning = body.get("reasoning")
    reasoning_tokens = 0
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        build.reasoning(summary=reasoning.get("summary") in ("auto", "concise", "detailed"))
        reasoning_tokens = THOUGHT_TOKENS
    if plan.text_chunks or not plan.tool_calls:
        build.message(plan.text_chunks, complete=plan.finish != "length")
    for call in plan.tool_calls:
        build.function_call(call.key, call.name, call.chunks)
    if plan.finish == "length":
        details = {"reason": "max_output_tokens"}
        final = build.response(
            "incomplete", incomplete_details=details, usage=_usage(plan, reasoning_tokens)
        )
        build.emit("response.incomplete", response=final)
    else:
        final = build.response(
            "completed", usage=_usage(plan, reasoning_tokens), completed_at=int(time.time())
        )
        build.emit("response.completed", response=final)
    return [
        ({**event, "sequence_number": seq}, is_delta)
        for seq, (event, is_delta) in enumerate(build.events)
    ]


def overflow_events(
    rejection: Rejection, response_id: str, body: dict[str, Any]
) -> list[tuple[Event, bool]]:
    """A streamed request over the context window: the Responses API answers 200, sends
    `response.created` and `response.in_progress`, then an `error` event whose error object is
    nested, as users report it (dyad-sh/dyad#1672, anomalyco/opencode#6071: `{"type": "error",
    "sequence_number": 2, "error": {"type": "invalid_request_error", "code":
    "context_length_exceeded", "message": "Your input exceeds the context window of this
    model…", "param": "input"}}`); openai-python raises that as `APIError` from its stream."""
    build = _Builder(response_id, body)
    first = "queued" if body.get("background") else "in_progress"
    build.emit("response.created", response=build.response(first))
    build.emit("response.in_progress", response=build.response("in_progress"))
    build.emit("error", error=overflow_error(rejection))
    return [
        ({**event, "sequence_number": seq}, is_delta)
        for seq, (event, is_delta) in enumerate(build.events)
    ]


def overflow_error(rejection: Rejection) -> dict[str, Any]:
    return {
        "type": "invalid_request_error",
        "code": rejection.code,
        "message": rejection.message,
        "param": rejection.param,
    }


@dataclass
class StoredResponse:
    id: str
    user_text: str
    background: bool
    events: list[Event]
    frames: list[Frame]
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled_at: float | None = None
    error: dict[str, Any] | None = None
    """Why it failed (a context overflow): `GET` shows it `failed` with this error."""

    @property
    def finished_at(self) -> float:
        return self.frames[-1].at

    def snapshot(self, now: float) -> dict[str, Any]:
        """The response object as `GET /v1/responses/{id}` shows it at `now`."""
        horizon = now if self.cancelled_at is None else min(now, self.cancelled_at)
        latest: dict[str, Any] = self.events[0]["response"]
        items: dict[int, Any] = {}
        for event, frame in zip(self.events, self.frames, strict=True):
            if frame.at > horizon:
                break
            latest = event.get("response", latest)
            if event["type"] in ("response.output_item.added", "response.output_item.done"):
                items[event["output_index"]] = event["item"]
        if latest["status"] in ("completed", "incomplete"):
            return latest
        if self.error is not None:
            return {**latest, "status": "failed", "error": self.error}
        status = "cancelled" if self.cancelled_at is not None else latest["status"]
        return {**latest, "status": status, "output": [items[i] for i in sorted(items)]}


class ResponsesRoutes:
    def __init__(self, state: FakeState) -> None:
        self.state = state
        self.store: dict[str, StoredResponse] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/v1/responses", self.create, methods=["POST"]),
            Route("/v1/responses/{response_id}", self.retrieve, methods=["GET"]),
            Route("/v1/responses/{response_id}/cancel", self.cancel, methods=["POST"]),
        ]

    def reset(self) -> None:
        self.store.clear()

    def _unknown_item(self, body: dict[str, Any]) -> Rejection | None:
        """An `item_reference` must name an item of a stored response: 404 "Item with id
        'rs_…' not found. Items are not persisted when `store` is set to false. Try again with
        `store` set to true, or remove this item from your input." (can1357/oh-my-pi#41)."""
        raw = body.get("input")
        items = raw if isinstance(raw, list) else []
        referenced = [
            str(item.get("id"))
            for item in items
            if isinstance(item, dict) and item.get("type") == "item_reference"
        ]
        if not referenced:
            return None
        known = {
            str(item.get("id"))
            for stored in self.store.values()
            for event in stored.events
            if event["type"] == "response.output_item.done"
            for item in [event["item"]]
        }
        for item_id in referenced:
            if item_id not in known:
                message = (
                    f"Item with id '{item_id}' not found. Items are not persisted when `store` "
                    "is set to false. Try again with `store` set to true, or remove this item "
                    "from your input."
                )
                return Rejection(404, message, param="input")
        return None

    async def create(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        transcript = from_responses(body)
        record = self.state.record("responses", body, transcript.user_text)
        background = bool(body.get("background"))
        directives = parse(transcript.user_text)
        verdict: Rejection | Fault | None
        if not body.get("stream") and not background:
            verdict = Rejection(400, "The fake provider only streams: set stream=true.")
        else:
            verdict = (
                rules.first_violation(
                    body,
                    rules.unknown_responses_parameter,
                    rules.responses_reasoning_effort,
                    rules.background_without_store,
                    rules.responses_function_call_outputs,
                )
                or self._unknown_item(body)
                or screen(self.state, transcript, directives, "responses")
            )
        response_id = f"resp_{uuid.uuid4().hex}"
        overflow = isinstance(verdict, Rejection) and verdict.code == "context_length_exceeded"
        if isinstance(verdict, Rejection) and not overflow:
            record.status = verdict.status
            return openai_error(verdict)
        continuing = None
        if transcript.partial is not None:
            continuing = Continuing(transcript.partial, repeat=True)
        plan = make_plan(transcript, directives, continuing)
        if isinstance(verdict, Rejection):  # the overflow, told inside the stream
            events = overflow_events(verdict, response_id, body)
            verdict = None
        else:
            events = response_events(plan, response_id, body)
        frames = [
            Frame(sse(event, event["type"]), delta, event["sequence_number"])
            for event, delta in events
        ]
        stored = StoredResponse(
            id=response_id,
            user_text=transcript.user_text,
            background=background,
            events=[event for event, _ in events],
            frames=schedule(frames, record.started_at, plan.delay_s, plan.ttft_s),
            error=events[-1][0]["error"] if events[-1][0]["type"] == "error" else None,
        )
        if background or body.get("store", True):
            self.store[response_id] = stored
        if not body.get("stream"):
            return JSONResponse(stored.snapshot(time.monotonic()))
        return FrameStream(
            stored.frames,
            state=self.state,
            record=record,
            fault=openai_stream_fault(verdict),
            stop=stored.cancelled,
        )

    def _find(self, request: Request) -> StoredResponse | Response:
        response_id = request.path_params["response_id"]
        stored = self.store.get(response_id)
        if stored is None:
            return openai_error(Rejection(404, f"No response found with id '{response_id}'."))
        return stored

    async def retrieve(self, request: Request) -> Response:
        stored = self._find(request)
        if not isinstance(stored, StoredResponse):
            return stored
        if request.query_params.get("stream") != "true":
            return JSONResponse(stored.snapshot(time.monotonic()))
        if not stored.background:
            message = "Only responses created with background=true can be streamed again."
            return openai_error(Rejection(400, message))
        after = int(request.query_params.get("starting_after", "-1"))
        body = {"response_id": stored.id, "starting_after": after}
        record = self.state.record("responses.retrieve", body, stored.user_text)
        cutoff = stored.cancelled_at
        frames = [
            frame
            for frame in stored.frames
            if (frame.seq or 0) > after and (cutoff is None or frame.at <= cutoff)
        ]
        return FrameStream(frames, state=self.state, record=record, stop=stored.cancelled)

    async def cancel(self, request: Request) -> Response:
        stored = self._find(request)
        if not isinstance(stored, StoredResponse):
            return stored
        record = self.state.record("responses.cancel", {"response_id": stored.id}, stored.user_text)
        if not stored.background:
            record.status = 400
            return openai_error(Rejection(400, SYNCHRONOUS_CANCEL))
        now = time.monotonic()
        if stored.cancelled_at is None and now < stored.finished_at:
            stored.cancelled_at = now
            stored.cancelled.set()
        return JSONResponse(stored.snapshot(now))
