"""How an adapter continues a partial answer, and the instruction fallback they share.

A retried model step that had already streamed text passes it as `ModelRequest.prefill`; each
adapter continues it by what its API really allows (docs/recovery.md, "Continuation per
provider"):

- `resume`: re-attach to the server-side response after the last event seen (OpenAI Responses
  background mode), or to the provider relay's copy of the step's stream (any API through
  `perdure relay`, `activities/providers/relayed.py`). Exact: nothing is generated twice.
- `prefill`: a trailing assistant message the API continues (Anthropic Messages without
  extended thinking; vLLM `continue_final_message`; DeepSeek `prefix: true`). Exact text.
- `instruction`: the API never continues a trailing assistant message (OpenAI Chat
  Completions answers it afresh), so the partial is sent as an assistant message followed by a
  user message asking to continue exactly where it stops (`CONTINUE_INSTRUCTION`); whatever
  the model repeats of the partial is trimmed (`domain.overlap`). Best effort.
"""

from typing import Literal

from pydantic import BaseModel

Mechanism = Literal["resume", "prefill", "instruction"]

ChatContinuation = Literal["instruction", "vllm", "deepseek"]
"""How `openai:` (Chat Completions) models continue a partial answer: `instruction` (the only
way the real OpenAI API allows), `vllm` (`continue_final_message`) or `deepseek` (`prefix:
true`); chosen by `PERDURE_OPENAI_CONTINUATION` (`activities/providers/config.py`)."""
CHAT_CONTINUATIONS: tuple[ChatContinuation, ...] = ("instruction", "vllm", "deepseek")


class Continuation(BaseModel, frozen=True):
    """How a partial answer is continued, and whether the result is exactly one answer."""

    mechanism: Mechanism
    exact: bool
    """True when the API itself continues: the final text is the partial plus new tokens only.
    False for `instruction`: the model is asked to continue and its repeat is trimmed."""
    via: str
    """What is used, for logs and docs, e.g. `vLLM continue_final_message`."""


CONTINUE_INSTRUCTION = (
    "Your previous message was cut off. Continue it exactly where it stops, starting with the "
    "very next character: do not repeat any of it, do not add any introduction or comment, and "
    "do not mention this request."
)
"""The user message that follows the partial answer in an `instruction` continuation. The fake
provider recognises it verbatim (perdure/testing/fakeprovider/transcript.py)."""

RESUME = Continuation(
    mechanism="resume", exact=True, via="re-attach to the background response (starting_after)"
)
RELAY = Continuation(
    mechanism="resume", exact=True, via="re-attach to the provider relay's copy of the stream"
)
INSTRUCTION = Continuation(
    mechanism="instruction", exact=False, via="partial + continue instruction, overlap trimmed"
)
