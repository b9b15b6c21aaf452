"""`POST /v1/messages` with `stream=true`: Anthropic's named SSE events."""

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakeprovider.directives import Fault, parse
from tests.fakeprovider.gate import Rejection, screen
from tests.fakeprovider.player import Frame, FrameStream, StreamFault, schedule, sse
from tests.fakeprovider.script import Plan, make_plan
from tests.fakeprovider.state import FakeState
from tests.fakeprovider.transcript import from_anthropic

_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_TRAILING_WHITESPACE = "messages: final assistant content cannot end with trailing whitespace"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error(rejection: Rejection) -> JSONResponse:
    request_id = f"req_{uuid.uuid4().hex[:24]}"
    body = {
        "type": "error",
        "error": {"type": _error_type(rejection.status), "message": rejection.message},
        "request_id": request_id,
    }
    headers = {"request-id": request_id, **rejection.headers}
    return JSONResponse(body, status_code=rejection.status, headers=headers)


def _event(data: dict[str, Any]) -> bytes:
    return sse(data, event=str(data["type"]))


def message_frames(plan: Plan, model: str) -> list[Frame]:
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": plan.input_tokens, "output_tokens": 1},
    }
    frames = [Frame(_event({"type": "message_start", "message": message}))]
    frames.append(Frame(_event({"type": "ping"})))
    index = 0
    if plan.text_chunks or not plan.tool_calls:
        block = {"type": "text", "text": ""}
        frames.append(
            Frame(_event({"type": "content_block_start", "index": 0, "content_block": block}))
        )
        for text in plan.text_chunks:
            delta = {"type": "text_delta", "text": text}
            frames.append(
                Frame(_event({"type": "content_block_delta", "index": 0, "delta": delta}), True)
            )
        frames.append(Frame(_event({"type": "content_block_stop", "index": 0})))
        index = 1
    for offset, call in enumerate(plan.tool_calls, start=index):
        tool_use = {"type": "tool_use", "id": f"toolu_{call.key}", "name": call.name, "input": {}}
        start = {"type": "content_block_start", "index": offset, "content_block": tool_use}
        frames.append(Frame(_event(start)))
        for part in call.chunks:
            delta = {"type": "input_json_delta", "partial_json": part}
            frames.append(
                Frame(
                    _event({"type": "content_block_delta", "index": offset, "delta": delta}), True
                )
            )
        frames.append(Frame(_event({"type": "content_block_stop", "index": offset})))
    stop = {"stop_reason": _STOP_REASON[plan.finish], "stop_sequence": None}
    usage = {"output_tokens": plan.output_tokens}
    frames.append(Frame(_event({"type": "message_delta", "delta": stop, "usage": usage})))
    frames.append(Frame(_event({"type": "message_stop"})))
    return frames


def _stream_fault(fault: Fault | None) -> StreamFault | None:
    if fault is None:
        return None
    if fault.kind == "midstream_error":
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return StreamFault(after=fault.after, action="error", error_frame=_event(error))
    return StreamFault(after=fault.after, action="stall" if fault.kind == "stall" else "abort")


class AnthropicRoutes:
    def __init__(self, state: FakeState) -> None:
        self.state = state

    def routes(self) -> list[Route]:
        return [Route("/v1/messages", self.create, methods=["POST"])]

    async def create(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        transcript = from_anthropic(body)
        record = self.state.record("messages", body, transcript.user_text)
        directives = parse(transcript.user_text)
        verdict: Rejection | Fault | None
        if not body.get("stream"):
            verdict = Rejection(400, "The fake provider only streams: set stream=true.")
        elif transcript.prefill is not None and transcript.prefill != transcript.prefill.rstrip():
            verdict = Rejection(400, _TRAILING_WHITESPACE)
        else:
            verdict = screen(self.state, transcript, directives)
        if isinstance(verdict, Rejection):
            record.status = verdict.status
            return anthropic_error(verdict)
        plan = make_plan(transcript, directives)
        frames = message_frames(plan, str(body.get("model", "")))
        return FrameStream(
            schedule(frames, record.started_at, plan.delay_s, plan.ttft_s),
            state=self.state,
            record=record,
            fault=_stream_fault(verdict),
        )
