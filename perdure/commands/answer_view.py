"""Show an answer in the terminal: its stream as it arrives, or a stored message.

An answer is a list of blocks in arrival order (Markdown text, dimmed reasoning, one line per
tool call and per tool result, notices). The rich view redraws the blocks of the current
segment live; a segment ends where the client must speak (an approval) or the answer ends,
and what it showed stays on screen. The plain view, for output that is not a terminal,
writes only the answer's text, as it arrives.
"""

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment
from rich.text import Text

LINE_CHARS = 120
"""Tool inputs and results are cut to one line of about this many characters."""
REFRESHES_PER_SECOND = 12
GOES_ON = frozenset(
    {
        "text-delta",
        "reasoning-delta",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
        "finish",
        "abort",
        "error",
    }
)
"""Chunks that show the answer going on again: a passing notice is gone with the first."""


def mapping(value: Any) -> dict[str, Any]:
    """A chunk's or part's object field; {} when it is missing or not an object."""
    return value if isinstance(value, dict) else {}


def one_line(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


@dataclass
class TextBlock:
    text: str = ""

    def render(self) -> RenderableType:
        return Markdown(self.text)


@dataclass
class ReasoningBlock:
    text: str = ""

    def render(self) -> RenderableType:
        return Text(self.text, style="dim italic")


@dataclass
class LineBlock:
    """One line: a tool call, a tool result, a notice."""

    text: str
    style: str = ""

    def render(self) -> RenderableType:
        return Text(self.text, style=self.style)


Block = TextBlock | ReasoningBlock | LineBlock


def call_line(name: str, arguments: Any) -> LineBlock:
    shown = "" if arguments in (None, {}) else " " + one_line(arguments)
    return LineBlock(f"⚙ {name}{shown}", style="cyan")


DIFF_LINES_SHOWN = 12
"""Lines of a workspace change's diff shown under its call (docs/workspace.md)."""


def output_line(output: Any) -> LineBlock:
    """A result on one line; a workspace change as what it changed (its diff's lines)."""
    diff = output.get("diff") if isinstance(output, dict) else None
    if isinstance(diff, str) and diff:
        lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++"))]
        more = len(lines) - DIFF_LINES_SHOWN
        shown = [f"    {line[:LINE_CHARS]}" for line in lines[:DIFF_LINES_SHOWN]]
        if more > 0:
            shown.append(f"    … {more} more lines")
        return LineBlock(f"  ↳ {output.get('path')} v{output.get('version')}\n" + "\n".join(shown),
                         style="dim")  # fmt: skip
    return LineBlock(f"  ↳ {one_line(output)}", style="dim")


def failure_line(error_text: str) -> LineBlock:
    return LineBlock(f"  ✗ {one_line(error_text)}", style="red")


def denied_line(reason: str | None) -> LineBlock:
    return LineBlock("  ✗ denied" + (f": {one_line(reason)}" if reason else ""), style="yellow")


def stopped_line(reason: str | None) -> LineBlock:
    if reason in (None, "user-cancelled"):
        return LineBlock("■ stopped", style="yellow")
    return LineBlock(f"■ ended: {reason}", style="yellow")


def error_line(error_text: str) -> LineBlock:
    return LineBlock(f"✗ error: {error_text}", style="bold red")


def usage_line(metadata: dict[str, Any]) -> LineBlock | None:
    """What the turn's model calls used, from its message metadata (docs/usage.md); None
    when the metadata says nothing of it."""
    usage = mapping(metadata.get("usage"))
    if not usage:
        return None
    inputs, outputs = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
    cached, reasoning = usage.get("cachedInputTokens", 0), usage.get("reasoningTokens", 0)
    line = f"· {usage.get('totalTokens', inputs + outputs):,} tokens: {inputs:,} in"
    line += f" ({cached:,} cached)" if cached else ""
    line += f", {outputs:,} out" + (f" ({reasoning:,} reasoning)" if reasoning else "")
    if metadata.get("finishReason") == "budget":
        line += " · the turn used its budget"
    return LineBlock(line, style="dim")


def recovery_line(data: dict[str, Any]) -> LineBlock:
    attempt, most = data.get("attempt"), data.get("maxAttempts")
    of = f" (attempt {attempt} of {most})" if attempt and most else ""
    return LineBlock(f"↻ the answer was interrupted and is recovering{of}…", style="yellow")


TASK_PART = "data-mcp-task"
"""An MCP call's task as it moves (docs/mcp.md#tasks): one line per call, rewritten."""
STEER_PART = "data-steer"
"""A steering message where it joined the answer (docs/api.md, "Steering a running turn")."""


def steering_line(part: dict[str, Any]) -> LineBlock:
    """A steering message where it joined the answer: the user's words, as the prompt shows
    them."""
    message = mapping(mapping(part.get("data")).get("message"))
    parts = message.get("parts")
    text = "".join(
        str(each.get("text", ""))
        for each in (parts if isinstance(parts, list) else [])
        if isinstance(each, dict) and each.get("type") == "text"
    )
    return LineBlock(f"› {text}", style="bold")


def task_line(part: dict[str, Any]) -> LineBlock:
    data = mapping(part.get("data"))
    message = data.get("statusMessage")
    said = f": {message}" if message else ""
    return LineBlock(f"  ⧗ {data.get('server')} task {data.get('status')}{said}", style="dim")


class Answer:
    """Folds chunks into blocks, as the AI SDK folds them into parts."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._open: dict[tuple[str, str], TextBlock | ReasoningBlock] = {}
        self._tasks: dict[str, LineBlock] = {}
        """Each call's task line, by its part id: rewritten as the task moves."""
        self.notice: LineBlock | None = None
        """Shown while the turn recovers, or stops; gone once the answer goes on (or ends)."""

    def apply(self, chunk: dict[str, Any]) -> None:  # noqa: C901 - one branch per chunk type
        kind = str(chunk.get("type", ""))
        if kind == "data-recovery":
            self.notice = recovery_line(mapping(chunk.get("data")))
            return
        if kind in GOES_ON:
            self.notice = None
        if kind in ("text-start", "reasoning-start"):
            block: TextBlock | ReasoningBlock = (
                TextBlock() if kind == "text-start" else ReasoningBlock()
            )
            self._open[(kind, str(chunk.get("id")))] = block
            self.blocks.append(block)
        elif kind in ("text-delta", "reasoning-delta"):
            open_block = self._open.get((kind.replace("-delta", "-start"), str(chunk.get("id"))))
            if open_block is not None:
                open_block.text += str(chunk.get("delta", ""))
        elif kind == "tool-input-available":
            self.blocks.append(call_line(str(chunk.get("toolName", "tool")), chunk.get("input")))
        elif kind == "tool-input-error":
            self.blocks.append(failure_line(str(chunk.get("errorText", "bad tool input"))))
        elif kind == "tool-output-available" and not chunk.get("preliminary"):
            self.blocks.append(output_line(chunk.get("output")))
        elif kind == "tool-output-error":
            self.blocks.append(failure_line(str(chunk.get("errorText", ""))))
        elif kind == "tool-output-denied":
            self.blocks.append(denied_line(chunk.get("reason")))
        elif kind == STEER_PART:
            self.blocks.append(steering_line(chunk))
        elif kind == TASK_PART:
            self._task(chunk)
        elif kind == "data-sub-agent":
            data = mapping(chunk.get("data"))
            self.blocks.append(
                LineBlock(
                    f"  ↳ agent {data.get('agent')} answers in chat {data.get('sessionId')}",
                    style="dim",
                )
            )
        elif kind == "abort":
            self.blocks.append(stopped_line(chunk.get("reason")))
        elif kind == "error":
            self.blocks.append(error_line(str(chunk.get("errorText", "the turn failed"))))
        if kind in ("finish", "message-metadata"):
            used = usage_line(mapping(chunk.get("messageMetadata")))
            if used is not None:
                self.blocks.append(used)

    def _task(self, chunk: dict[str, Any]) -> None:
        line = task_line(chunk)
        shown = self._tasks.get(str(chunk.get("id")))
        if shown is None:
            self._tasks[str(chunk.get("id"))] = line
            self.blocks.append(line)
        else:
            shown.text = line.text

    def renderable(self, since: int = 0) -> RenderableType:
        shown = [block.render() for block in self.blocks[since:]]
        if self.notice is not None:
            shown.append(self.notice.render())
        return Group(*shown)


class AnswerView(Protocol):
    def segment(self) -> contextlib.AbstractContextManager[None]:
        """A stretch of the answer shown without interruption (until the client speaks)."""
        ...

    def apply(self, chunk: dict[str, Any]) -> None: ...

    def stopping(self) -> None:
        """A stop was asked for; the stream goes on to the turn's end."""
        ...


@dataclass(frozen=True)
class Tail:
    """The last lines of a renderable that fit on the screen. A live area taller than the
    screen cannot be redrawn in place: every redraw would leave a copy of its top behind."""

    renderable: RenderableType

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options, pad=False)
        for index, line in enumerate(lines[-max(1, options.size.height - 1) :]):
            if index:
                yield Segment.line()
            yield from line


@dataclass
class LiveView:
    """The answer as Markdown, redrawn as it grows (a terminal)."""

    console: Console
    answer: Answer = field(default_factory=Answer)
    _since: int = 0
    _live: Live | None = None
    _closing: bool = False

    def _frame(self) -> RenderableType:
        whole = self.answer.renderable(self._since)
        return whole if self._closing else Tail(whole)

    @contextlib.contextmanager
    def segment(self) -> Iterator[None]:
        self._since = len(self.answer.blocks)
        self._live = Live(
            get_renderable=self._frame,
            console=self.console,
            refresh_per_second=REFRESHES_PER_SECOND,
        )
        try:
            with self._live:
                try:
                    yield
                finally:
                    # The frame drawn as the live area closes stays: all of the segment.
                    self._closing = True
        finally:
            self._closing = False
            self._live = None
            # What recovers or stops is done once its segment is: no notice stays behind.
            self.answer.notice = None

    def apply(self, chunk: dict[str, Any]) -> None:
        self.answer.apply(chunk)

    def stopping(self) -> None:
        self.answer.notice = LineBlock("■ stopping…", style="yellow")
        if self._live is not None:
            self._live.refresh()  # at once: the stop may end the answer before the next redraw


@dataclass
class PlainView:
    """Only the answer's text, written as it arrives (output that is not a terminal)."""

    out: IO[str]
    _wrote: bool = False

    @contextlib.contextmanager
    def segment(self) -> Iterator[None]:
        yield

    def stopping(self) -> None:
        """Nothing to show: the output is the answer's text only."""

    def apply(self, chunk: dict[str, Any]) -> None:
        if chunk.get("type") == "text-delta":
            self.out.write(str(chunk.get("delta", "")))
            self.out.flush()
            self._wrote = True
        elif chunk.get("type") == "text-start" and self._wrote:
            self.out.write("\n\n")

    def close(self) -> None:
        if self._wrote:
            self.out.write("\n")
            self.out.flush()


def message_blocks(message: dict[str, Any]) -> list[Block]:
    """A stored message (an AI SDK UIMessage) as blocks."""
    blocks: list[Block] = []
    for part in message.get("parts") or []:
        kind = str(part.get("type", ""))
        if kind == "text":
            blocks.append(TextBlock(str(part.get("text", ""))))
        elif kind == "reasoning":
            blocks.append(ReasoningBlock(str(part.get("text", ""))))
        elif kind.startswith("tool-") or kind == "dynamic-tool":
            blocks.extend(_tool_part_blocks(part, kind))
        elif kind == STEER_PART:
            blocks.append(steering_line(part))
        elif kind == TASK_PART:
            blocks.append(task_line(part))
    metadata = mapping(message.get("metadata"))
    if metadata.get("status") == "aborted":
        blocks.append(stopped_line(None))
    elif metadata.get("status") == "error":
        blocks.append(LineBlock("✗ the turn ended in an error", style="bold red"))
    used = usage_line(metadata)
    if used is not None:
        blocks.append(used)
    return blocks


def _tool_part_blocks(part: dict[str, Any], kind: str) -> list[Block]:
    name = str(part.get("toolName")) if kind == "dynamic-tool" else kind.removeprefix("tool-")
    blocks: list[Block] = [call_line(name, part.get("input"))]
    state = part.get("state")
    approval = mapping(part.get("approval"))
    if state == "output-available":
        blocks.append(output_line(part.get("output")))
    elif state == "output-error":
        blocks.append(failure_line(str(part.get("errorText", ""))))
    elif state == "output-denied":
        blocks.append(denied_line(approval.get("reason")))
    elif state == "approval-requested":
        blocks.append(LineBlock("  … waits for your approval", style="yellow"))
    return blocks


def message_renderable(message: dict[str, Any]) -> RenderableType:
    """A stored message: the user's text after a marker, an answer as its blocks."""
    if message.get("role") == "user":
        text = "".join(
            str(part.get("text", ""))
            for part in message.get("parts") or []
            if part.get("type") == "text"
        )
        return Text.assemble(("› ", "bold green"), (text, "bold"))
    return Group(*(block.render() for block in message_blocks(message)))
