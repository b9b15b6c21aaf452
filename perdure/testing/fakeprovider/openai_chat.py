"""`POST …/chat/completions` with `stream=true`: `data: {chat.completion.chunk}` … `[DONE]`.

Three flavours of the same wire format, each as its server really behaves:

- OpenAI, `/v1/chat/completions`: refuses unknown body parameters and unpaired tool messages
  (`rules.py`). It never continues a trailing assistant message: the answer starts afresh
  ("the model generates the next assistant message", and nothing in the Chat Completions
  reference continues one; vLLM documents `continue_final_message` as its own extension).
  A partial answer followed by the adapters' continue instruction is answered by a model that
  follows it, repeating the last word or two of the partial first, as real models often do.
- vLLM, `/vllm/v1/chat/completions`: with `continue_final_message: true` (and
  `add_generation_prompt: false`; both true is refused with vLLM's "Cannot set both
  `continue_final_message` and `add_generation_prompt` to True.") the final assistant message
  is continued exactly. vLLM ignores parameters it does not know.
  https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
- DeepSeek beta, `/deepseek/beta/chat/completions`: a last assistant message with
  `"prefix": true` is continued exactly. https://api-docs.deepseek.com/guides/chat_prefix_completion
"""

import time
import uuid
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from perdure.testing.fakeprovider import rules
from perdure.testing.fakeprovider.anthropic import THOUGHT_TOKENS
from perdure.testing.fakeprovider.directives import Fault, parse
from perdure.testing.fakeprovider.gate import Rejection, screen
from perdure.testing.fakeprovider.openai_common import openai_error, openai_stream_fault
from perdure.testing.fakeprovider.player import Frame, FrameStream, schedule, sse
from perdure.testing.fakeprovider.script import Continuing, Plan, make_plan
from perdure.testing.fakeprovider.state import FakeState
from perdure.testing.fakeprovider.transcript import Transcript, from_chat

Flavour = Literal["openai", "vllm", "deepseek"]
_PATHS: dict[Flavour, str] = {
    "openai": "/v1/chat/completions",
    "vllm": "/vllm/v1/chat/completions",
    "deepseek": "/deepseek/beta/chat/completions",
}
_VLLM_BOTH = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
"""vllm/entrypoints/openai/protocol.py, `check_generation_prompt`."""

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def chat_usage(plan: Plan, reasoning_tokens: int, details: bool) -> dict[str, Any]:
    """The last chunk's `usage`: `prompt_tokens` counts the cached tokens too, and
    `completion_tokens` the reasoning ones (`rejected_prediction_tokens` are, "like reasoning
    tokens, … still counted in the total completion tokens", the API reference's
    `CompletionTokensDetails`;
    https://developers.openai.com/api/reference/resources/chat/subresources/completions/streaming-events,
    https://developers.openai.com/api/docs/guides/prompt-caching,
    https://developers.openai.com/api/docs/guides/reasoning). OpenAI sends both details
    objects, zeros included, "all requests … will display a `cached_tokens` field" (the prompt
    caching guide). vLLM sends neither unless started with `--enable-prompt-tokens-details`
    (vllm-project/vllm#16162), and this fake's vLLM runs with the defaults; its DeepSeek sends
    neither either (DeepSeek's own `prompt_cache_hit_tokens` is not modelled)."""
    completion_tokens = plan.output_tokens + reasoning_tokens
    usage: dict[str, Any] = {
        "prompt_tokens": plan.input_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": plan.input_tokens + completion_tokens,
    }
    if details:
        usage["prompt_tokens_details"] = {
            "cached_tokens": plan.cached_input_tokens,
            "audio_tokens": 0,
        }
        usage["completion_tokens_details"] = {
            "reasoning_tokens": reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    return usage


def chat_frames(
    plan: Plan,
    model: str,
    include_usage: bool,
    reasoning_tokens: int = 0,
    usage_details: bool = True,
) -> list[Frame]:
    """The stream of chunks; with `include_usage`, a last chunk with `choices: []` and the
    `usage` (`chat_usage`) before `[DONE]`, every other chunk carrying `usage: null`."""
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
        usage = chat_usage(plan, reasoning_tokens, usage_details)
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


def vllm_error(rejection: Rejection) -> JSONResponse:
    """vLLM's error body: `{"error": {"message", "type": "BadRequestError", "param", "code"}}`."""
    error = {"message": rejection.message, "type": "BadRequestError", "param": None, "code": 400}
    return JSONResponse({"error": error}, status_code=rejection.status)


def _continuing(
    flavour: Flavour, body: dict[str, Any], transcript: Transcript
) -> Continuing | None:
    """What the answer goes on from: an exact continuation where the server offers one and the
    request asks for it, else a partial followed by the continue instruction, else nothing."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if transcript.prefill is not None:
        if flavour == "vllm" and body.get("continue_final_message"):
            return Continuing(transcript.prefill)
        if flavour == "deepseek" and last.get("prefix") is True:
            return Continuing(transcript.prefill)
    if transcript.partial is not None:
        return Continuing(transcript.partial, repeat=True)
    return None


def _reasoning_tokens(flavour: Flavour, body: dict[str, Any]) -> int:
    """A reasoning model asked for an effort reasons (the request passed
    `rules.chat_reasoning_effort`, so the model takes one) and, as Chat Completions does, keeps
    its reasoning to itself: it shows only in the usage."""
    return THOUGHT_TOKENS if flavour == "openai" and body.get("reasoning_effort") else 0


class ChatRoutes:
    def __init__(self, state: FakeState) -> None:
        self.state = state

    def routes(self) -> list[Route]:
        return [
            Route(path, self._handler(flavour), methods=["POST"])
            for flavour, path in _PATHS.items()
        ]

    def _handler(self, flavour: Flavour) -> Any:
        async def handle(request: Request) -> Response:
            return await self.create(request, flavour)

        return handle

    def _refusal(self, flavour: Flavour, body: dict[str, Any]) -> Rejection | None:
        if not body.get("stream"):
            return Rejection(400, "The fake provider only streams: set stream=true.")
        if flavour == "openai":
            return rules.first_violation(
                body,
                rules.unrecognized_chat_arguments,
                rules.chat_reasoning_effort,
                rules.chat_tool_messages,
            )
        if flavour == "vllm" and body.get("continue_final_message"):
            if body.get("add_generation_prompt", True):
                return Rejection(400, _VLLM_BOTH)
        return None

    async def create(self, request: Request, flavour: Flavour = "openai") -> Response:
        body: dict[str, Any] = await request.json()
        transcript = from_chat(body)
        record = self.state.record("chat.completions", body, transcript.user_text)
        directives = parse(transcript.user_text)
        verdict: Rejection | Fault | None = self._refusal(flavour, body) or screen(
            self.state, transcript, directives, "chat"
        )
        if isinstance(verdict, Rejection):
            record.status = verdict.status
            return vllm_error(verdict) if flavour == "vllm" else openai_error(verdict)
        plan = make_plan(transcript, directives, _continuing(flavour, body, transcript))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        frames = chat_frames(
            plan,
            str(body.get("model", "")),
            include_usage,
            reasoning_tokens=_reasoning_tokens(flavour, body),
            usage_details=flavour == "openai",
        )
        return FrameStream(
            schedule(frames, record.started_at, plan.delay_s, plan.ttft_s),
            state=self.state,
            record=record,
            fault=openai_stream_fault(verdict),
        )
