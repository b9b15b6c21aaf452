"""`POST /v1/messages` with `stream=true`: Anthropic's named SSE events.

As strict as the real API (`rules.py`): tool_use/tool_result pairing, the `thinking`
configuration, the thinking-block requirement when thinking is on, no trailing whitespace in a
final assistant message. A final assistant message is a prefill and is continued exactly; a
partial followed by the continue instruction is answered by a model that follows it.

It answers by model id as each Claude generation does (`rules.anthropic_generation`): prefill
is a 400 from 4.6 on, `enabled` thinking from 4.7 on, and so on.

With thinking on (`enabled` or `adaptive`) the answer starts with a thinking block, streamed as
the real API streams it: `content_block_start` `{"type": "thinking", "thinking": ""}`,
`thinking_delta`s, then a `signature_delta` "just before the block's content_block_stop"
(the SDK's `SignatureDelta` docs; https://platform.claude.com/docs/en/build-with-claude/streaming).
With the display `omitted` (the default from Claude 4.7 on) there are no `thinking_delta`s:
the block carries only its signature.
Thinking deltas are not content deltas: faults and counters see only the answer.
"""

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from perdure.testing.fakeprovider import rules
from perdure.testing.fakeprovider.directives import Fault, parse
from perdure.testing.fakeprovider.gate import Rejection, screen
from perdure.testing.fakeprovider.player import Frame, FrameStream, StreamFault, schedule, sse
from perdure.testing.fakeprovider.script import Continuing, Plan, make_plan, words
from perdure.testing.fakeprovider.state import FakeState
from perdure.testing.fakeprovider.transcript import Transcript, from_anthropic

_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
THINKING = "Let me work out what is asked, then answer it."
"""What the fake model thinks, when thinking is enabled."""
THOUGHT_TOKENS = len(words(THINKING))
"""The output tokens its thinking counts for (a word a token, as its answers are counted), in
every API's usage: Anthropic's `output_tokens`, OpenAI's `reasoning_tokens`."""
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


def _thinking_frames(signature: str, shown: bool) -> list[Frame]:
    block = {"type": "thinking", "thinking": ""}
    frames = [Frame(_event({"type": "content_block_start", "index": 0, "content_block": block}))]
    for text in words(THINKING) if shown else []:
        delta = {"type": "thinking_delta", "thinking": text}
        frames.append(Frame(_event({"type": "content_block_delta", "index": 0, "delta": delta})))
    delta = {"type": "signature_delta", "signature": signature}
    frames.append(Frame(_event({"type": "content_block_delta", "index": 0, "delta": delta})))
    frames.append(Frame(_event({"type": "content_block_stop", "index": 0})))
    return frames


def _input_usage(plan: Plan) -> dict[str, int]:
    """The input counts of a message's `usage`: `input_tokens` are the ones neither read from
    nor written to the prompt cache ("Total input tokens in a request is the summation of
    `input_tokens`, `cache_creation_input_tokens`, and `cache_read_input_tokens`", the API
    reference's `Usage`; https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    #tracking-cache-performance). The fake writes nothing to a cache.

    `message_start` carries them, and so does the final `message_delta`, whose counts are
    cumulative (https://platform.claude.com/docs/en/build-with-claude/streaming, its
    `message_delta` usage repeating the input and cache counts; the SDK's `MessageDeltaUsage`:
    "The cumulative number of ...")."""
    return {
        "input_tokens": plan.input_tokens - plan.cached_input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": plan.cached_input_tokens,
    }


def message_frames(
    plan: Plan, model: str, thinking: bool = False, shown: bool = True
) -> list[Frame]:
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_input_usage(plan), "output_tokens": 1},
    }
    frames = [Frame(_event({"type": "message_start", "message": message}))]
    frames.append(Frame(_event({"type": "ping"})))
    index = 0
    if thinking:
        signature = rules.sign_thinking(THINKING if shown else "")
        frames += _thinking_frames(signature=signature, shown=shown)
        index = 1
    if plan.text_chunks or not plan.tool_calls:
        block = {"type": "text", "text": ""}
        start = {"type": "content_block_start", "index": index, "content_block": block}
        frames.append(Frame(_event(start)))
        for text in plan.text_chunks:
            delta = {"type": "text_delta", "text": text}
            frames.append(
                Frame(_event({"type": "content_block_delta", "index": index, "delta": delta}), True)
            )
        frames.append(Frame(_event({"type": "content_block_stop", "index": index})))
        index += 1
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
    thought = THOUGHT_TOKENS if thinking else 0
    usage = {**_input_usage(plan), "output_tokens": plan.output_tokens + thought}
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
        else:
            verdict = rules.first_violation(
                body,
                rules.anthropic_generation,
                rules.anthropic_signatures,
                rules.anthropic_thinking_config,
                rules.anthropic_tool_pairs,
                rules.anthropic_thinking_blocks,
                rules.anthropic_trailing_whitespace,
            ) or screen(self.state, transcript, directives, "anthropic")
        if isinstance(verdict, Rejection):
            record.status = verdict.status
            return anthropic_error(verdict)
        plan = make_plan(transcript, directives, _continuing(transcript))
        thinking = rules.thinking_enabled(body)
        frames = message_frames(
            plan, str(body.get("model", "")), thinking=thinking, shown=rules.thinking_shown(body)
        )
        return FrameStream(
            schedule(frames, record.started_at, plan.delay_s, plan.ttft_s),
            state=self.state,
            record=record,
            fault=_stream_fault(verdict),
        )


def _continuing(transcript: Transcript) -> Continuing | None:
    """A final assistant message is a prefill, continued exactly; a partial followed by the
    continue instruction is continued the way a model following it does."""
    if transcript.prefill is not None:
        return Continuing(transcript.prefill)
    if transcript.partial is not None:
        return Continuing(transcript.partial, repeat=True)
    return None
