"""Parse the `@directives` that script the fake provider from the last user message.

Every directive is a token starting with `@`; unknown `@words` stay part of the text.

    @count N                      answer "1 2 … N"
    @markdown                     answer MARKDOWN_SAMPLE (a list and a fenced code block)
    @delay MS                     sleep MS ms before every content delta
    @ttft MS                      sleep MS ms before the first content delta
    @cached N                     the provider reports N of the prompt's input tokens as read
                                  from its prompt cache (at most the input tokens), in each
                                  API's own usage fields; the vLLM route reports none (as vLLM
                                  by default), nor does the DeepSeek one (its
                                  `prompt_cache_hit_tokens` is not modelled)
    @tool NAME {json args}        call tool NAME (args: a JSON object, rest of the line)
    @parallel                     call all pending tools in one step
    @fail STATUS [retry-after=S] [retry-after-ms=MS] [xK]
    @disconnect_after D [xK]      close the connection abruptly after D deltas
    @stall_after D [xK]           go silent after D deltas until the client leaves
    @midstream_error D [xK]       error event (Anthropic) / abrupt close (OpenAI) after D deltas
    @reject_prefill               HTTP 400 for any request carrying an assistant prefill
    @context_limit N              HTTP 400 "context full", as each API words it, for a
                                  request over N input tokens (as the fake counts them)
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

FaultKind = Literal["fail", "disconnect", "stall", "midstream_error"]

_TOKEN = re.compile(r"\s*(\S+)")
_TIMES = re.compile(r"^x(\d+)$")
_OPTION = re.compile(r"^(retry-after|retry-after-ms)=(\S+)$")


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    times: int = 1
    """Applied to the first `times` requests for the same user text."""
    after: int = 0
    """Content deltas sent before the fault strikes (stream faults)."""
    status: int = 500
    retry_after: str | None = None
    retry_after_ms: str | None = None


@dataclass(frozen=True)
class ToolDirective:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Directives:
    text: str
    """The user text without its directives, whitespace normalised."""
    count: int | None = None
    markdown: bool = False
    delay_ms: int = 0
    ttft_ms: int = 0
    cached_tokens: int = 0
    tools: list[ToolDirective] = field(default_factory=list)
    parallel: bool = False
    faults: list[Fault] = field(default_factory=list)
    reject_prefill: bool = False
    context_limit: int | None = None


class _Tokens:
    """A cursor over the whitespace-separated tokens of one line."""

    def __init__(self, line: str) -> None:
        self.rest = line

    def next(self) -> str | None:
        match = _TOKEN.match(self.rest)
        if match is None:
            return None
        self.rest = self.rest[match.end() :]
        return match.group(1)

    def peek(self) -> str | None:
        match = _TOKEN.match(self.rest)
        return match.group(1) if match else None

    def int_arg(self, default: int = 0) -> int:
        token = self.peek()
        if token is not None and token.isdigit():
            self.next()
            return int(token)
        return default

    def times(self) -> int:
        token = self.peek()
        match = _TIMES.match(token) if token else None
        if match:
            self.next()
            return max(1, int(match.group(1)))
        return 1

    def json_object(self) -> dict[str, Any]:
        self.rest = self.rest.lstrip()
        if not self.rest.startswith("{"):
            return {}
        try:
            value, end = json.JSONDecoder().raw_decode(self.rest)
        except json.JSONDecodeError:
            self.rest = ""
            return {}
        self.rest = self.rest[end:]
        return value if isinstance(value, dict) else {}


def _parse_fail(tokens: _Tokens) -> Fault:
    status = tokens.int_arg(500)
    options: dict[str, str] = {}
    while (token := tokens.peek()) is not None and (match := _OPTION.match(token)):
        tokens.next()
        options[match.group(1)] = match.group(2)
    return Fault(
        kind="fail",
        status=status,
        retry_after=options.get("retry-after"),
        retry_after_ms=options.get("retry-after-ms"),
        times=tokens.times(),
    )


_STREAM_FAULTS: dict[str, FaultKind] = {
    "@disconnect_after": "disconnect",
    "@stall_after": "stall",
    "@midstream_error": "midstream_error",
}


def parse(user_text: str) -> Directives:
    words: list[str] = []
    found: dict[str, Any] = {"tools": [], "faults": []}
    for line in user_text.splitlines():
        tokens = _Tokens(line)
        while (token := tokens.next()) is not None:
            if token == "@count":
                found["count"] = tokens.int_arg(0)
            elif token == "@markdown":
                found["markdown"] = True
            elif token == "@delay":
                found["delay_ms"] = tokens.int_arg(0)
            elif token == "@ttft":
                found["ttft_ms"] = tokens.int_arg(0)
            elif token == "@cached":
                found["cached_tokens"] = tokens.int_arg(0)
            elif token == "@tool" and (name := tokens.next()) is not None:
                found["tools"].append(ToolDirective(name=name, arguments=tokens.json_object()))
            elif token == "@parallel":
                found["parallel"] = True
            elif token == "@reject_prefill":
                found["reject_prefill"] = True
            elif token == "@context_limit":
                found["context_limit"] = tokens.int_arg(0)
            elif token == "@fail":
                found["faults"].append(_parse_fail(tokens))
            elif token in _STREAM_FAULTS:
                after = tokens.int_arg(0)
                kind = _STREAM_FAULTS[token]
                found["faults"].append(Fault(kind=kind, after=after, times=tokens.times()))
            else:
                words.append(token)
    return Directives(text=" ".join(words), **found)
