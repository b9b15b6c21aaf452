"""Decide what the fake model answers: a deterministic function of the request."""

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from perdure.testing.fakeprovider.directives import Directives, ToolDirective
from perdure.testing.fakeprovider.transcript import ToolResult, Transcript

Finish = Literal["stop", "length", "tool_calls"]

_WORD = re.compile(r"\s*\S+")
_ARGUMENT_CHUNK = 8


@dataclass(frozen=True)
class ToolCallPlan:
    key: str
    """A stable id suffix; each wire format adds its own prefix (`call_`, `toolu_`, ...)."""
    name: str
    arguments: str
    chunks: list[str]


@dataclass(frozen=True)
class Plan:
    text_chunks: list[str]
    tool_calls: list[ToolCallPlan]
    finish: Finish
    delay_s: float
    ttft_s: float
    input_tokens: int
    cached_input_tokens: int = 0
    """How many of `input_tokens` the provider reports as read from its prompt cache (`@cached`)."""

    @property
    def text(self) -> str:
        return "".join(self.text_chunks)

    @property
    def output_tokens(self) -> int:
        return len(self.text_chunks) + sum(len(call.chunks) for call in self.tool_calls)


def words(text: str) -> list[str]:
    """Split into deltas of one word each, every word keeping its leading whitespace."""
    return _WORD.findall(text)


@dataclass(frozen=True)
class Continuing:
    """A partial answer the fake model goes on from (see `make_plan`)."""

    partial: str
    repeat: bool = False
    """False: an API that continues the text exactly (a prefill). True: a model asked by
    instruction to continue, which, as real models often do, starts by repeating the last
    word or two of the partial (the word in progress restarted)."""


def continuation(chunks: list[str], prefill: str | None) -> list[str]:
    """The chunks still to send after `prefill`, cut at the same boundaries as the full answer."""
    full = "".join(chunks)
    if not prefill or not full.startswith(prefill):
        return chunks
    remainder: list[str] = []
    position = 0
    for chunk in chunks:
        end = position + len(chunk)
        if end > len(prefill):
            remainder.append(chunk[max(0, len(prefill) - position) :])
        position = end
    return remainder


def repeating_continuation(chunks: list[str], partial: str) -> list[str]:
    """The chunks from the start of the word before the one the partial ends in (that word
    restarted if the partial ends inside it), the first without its leading whitespace."""
    full = "".join(chunks)
    if not partial or not full.startswith(partial):
        return chunks
    position, last = 0, len(chunks) - 1
    for index, chunk in enumerate(chunks):
        position += len(chunk)
        if position >= len(partial):
            last = index
            break
    rest = chunks[max(0, last - 1) :]
    return [rest[0].lstrip(), *rest[1:]] if rest else rest


def _call_key(user_text: str, position: int, name: str) -> str:
    digest = hashlib.sha256(f"{user_text}\x00{position}\x00{name}".encode()).hexdigest()
    return digest[:24]


def _tool_step(
    user_text: str, tools: list[ToolDirective], results: list[ToolResult], parallel: bool
) -> tuple[list[ToolCallPlan], str]:
    """The calls still pending (one, or all with `parallel`), else the answer quoting results."""
    outputs: dict[str, list[str]] = defaultdict(list)
    for result in results:
        outputs[result.name].append(result.output)
    seen: dict[str, int] = defaultdict(int)
    pending: list[ToolCallPlan] = []
    answers: list[str] = []
    for position, tool in enumerate(tools):
        occurrence = seen[tool.name]
        seen[tool.name] += 1
        if occurrence < len(outputs[tool.name]):
            answers.append(f"Tool {tool.name} returned: {outputs[tool.name][occurrence]}")
            continue
        arguments = json.dumps(tool.arguments, separators=(",", ":"))
        chunks = [
            arguments[i : i + _ARGUMENT_CHUNK] for i in range(0, len(arguments), _ARGUMENT_CHUNK)
        ]
        key = _call_key(user_text, position, tool.name)
        pending.append(ToolCallPlan(key=key, name=tool.name, arguments=arguments, chunks=chunks))
    if pending:
        return (pending if parallel else pending[:1]), ""
    return [], " ".join(answers)


MARKDOWN_SAMPLE = """Here is an iterative version:

```python
def fibonacci(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
```

It takes **O(n)** time and `O(1)` memory:

- no recursion, so no stack limit
- no table of earlier values"""
"""What `@markdown` answers: Markdown that a chat client renders (the web page's tests)."""


def answer_text(directives: Directives) -> str:
    if directives.markdown:
        return MARKDOWN_SAMPLE
    if directives.count is not None:
        return " ".join(str(n) for n in range(1, directives.count + 1))
    return f"You said: {directives.text}".rstrip()


def make_plan(
    transcript: Transcript, directives: Directives, continuing: Continuing | None = None
) -> Plan:
    """The fake model's answer. Given `continuing`, a text answer that starts with the partial
    is continued from it (exactly, or repeating its last words); any other request is answered
    from the start, whatever assistant text ends it."""
    calls: list[ToolCallPlan] = []
    if directives.tools:
        calls, text = _tool_step(
            transcript.user_text, directives.tools, transcript.tool_results, directives.parallel
        )
    else:
        text = answer_text(directives)
    chunks = [] if calls else words(text)
    if chunks and continuing is not None:
        if continuing.repeat:
            chunks = repeating_continuation(chunks, continuing.partial)
        else:
            chunks = continuation(chunks, continuing.partial)
    finish: Finish = "tool_calls" if calls else "stop"
    if transcript.max_tokens is not None and len(chunks) > transcript.max_tokens:
        chunks, finish = chunks[: transcript.max_tokens], "length"
    return Plan(
        text_chunks=chunks,
        tool_calls=calls,
        finish=finish,
        delay_s=directives.delay_ms / 1000,
        ttft_s=directives.ttft_ms / 1000,
        input_tokens=transcript.input_tokens,
        cached_input_tokens=min(directives.cached_tokens, transcript.input_tokens),
    )
