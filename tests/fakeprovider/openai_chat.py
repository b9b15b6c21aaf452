"""`POST /v1/chat/completions` with `stream=true`: `data: {chat.completion.chunk}` … `[DONE]`."""

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fakeprovider.directives import parse
from tests.fakeprovider.gate import Rejection, screen
from tests.fakeprovider.openai_common import openai_error, openai_stream_fault
from tests.fakeprovider.player import Frame, FrameStream, schedule, sse
from tests.fakeprovider.script import Plan, make_plan
from tests.fakeprovider.state import FakeState
from tests.fakeprovider.transcript import from_chat

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def chat_frames(plan: Plan, model: str, include_usage: bool) -> list[Frame]:
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return sse(body)

    frames = [Frame(chunk({"role": "assistant", "content": ""}))]
    frames += [Frame(chunk({"content": text}), delta=True) for text in plan.text_chunks]
    for index, call in enumerate(plan.tool_calls):
        head = {"name": call.name, "arguments": ""}
        opening = {"index": index, "id": f"call_{call.key}", "type": "function", "function": head}
        frames.append(Frame(chunk({"tool_calls": [opening]})))
        frames += [
            Frame(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}), True)
            for part in call.chunks
        ]
    frames.append(Frame(chunk({}, _FINISH[plan.finish])))
    if include_usage:
        usage = {
            "prompt_tokens": plan.input_tokens,
            "completion_tokens": plan.output_tokens,
            "total_tokens": plan.input_tokens + plan.output_tokens,
        }
        frames.append(
            Frame(
                sse(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "system_fingerprint": None,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        )
    frames.append(Frame(b"data: [DONE]\n\n"))
    return frames


class ChatRoutes:
    def __init__(self, state: FakeState) -> None:
        self.state = state

    def routes(self) -> list[Route]:
        return [Route("/v1/chat/completions", self.create, methods=["POST"])]

    async def create(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        transcript = from_chat(body)
        record = self.state.record("chat.completions", body, transcript.user_text)
        if not body.get("stream"):
            record.status = 400
            return openai_error(Rejection(400, "The fake provider only streams: set stream=true."))
        directives = parse(transcript.user_text)
        verdict = screen(self.state, transcript, directives)
        if isinstance(verdict, Rejection):
            record.status = verdict.status
            return openai_error(verdict)
        plan = make_plan(transcript, directives)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        frames = chat_frames(plan, str(body.get("model", "")), include_usage)
        return FrameStream(
            schedule(frames, record.started_at, plan.delay_s, plan.ttft_s),
            state=self.state,
            record=record,
            fault=openai_stream_fault(verdict),
        )
