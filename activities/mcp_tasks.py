"""MCP tasks (the `io.modelcontextprotocol/tasks` extension of the 2026-07-28 protocol,
SEP-2663): a server may answer a tool call with a task handle instead of its result, and the
client polls `tasks/get` until the task ends.

The handle goes into the answer's log (a `data-mcp-task` part, one per call, replaced as the
task moves on) before the first poll: the activity or step that runs the call again after a
worker died follows the same task instead of starting the work twice, and the stream shows
the task's status and message as `tasks/get` reports them. A call cancelled while it follows
its task (a stop) sends `tasks/cancel`. docs/mcp.md#tasks."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from activities.mcp_input import InputRound, responses_of
from perdure.domain.mcp_tasks import TERMINAL, TaskSeen, task_chunk
from perdure.domain.ui import Chunk
from perdure.mcp_servers import McpServer

if TYPE_CHECKING:  # the SDK is imported at the worker's start (`import_mcp_sdk`)
    from mcp.client.extension import ClientExtension
    from mcp.client.session import ClientSession
    from mcp.types import CallToolResult, InputRequiredResult

EXTENSION = "io.modelcontextprotocol/tasks"
MIN_POLL_SECONDS = 0.1
MAX_POLL_SECONDS = 5.0
"""The server's `pollIntervalMs` is honoured within these: a server cannot make a step spin,
nor leave a finished task unseen for long."""
DEFAULT_POLL_SECONDS = 1.0
CANCEL_SECONDS = 5.0
"""How long a stopped call waits for the server to acknowledge `tasks/cancel`."""


class McpTaskFailed(Exception):
    """The server's task ended `failed` or `cancelled` (its message goes to the model)."""


class McpTaskTimedOut(Exception):
    """The task was still running after the server's `task_timeout` (it was cancelled)."""


@dataclass(frozen=True)
class TaskHost:
    """Where a call's task is written down and read back: the answer's log, as the caller (the
    tool activity, a step's tool round) holds it."""

    tool_call_id: str
    known: TaskSeen | None
    """The task an earlier attempt of this call recorded, if any."""
    record: Callable[[list[Chunk]], Awaitable[None]]
    """Appends to the answer's log, durably, before it returns."""
    handing_over: Callable[[], bool] = lambda: False
    """True while the call is cancelled to be followed elsewhere (a step hands a long round's
    calls to the workflow): its task goes on, uncancelled."""


_host: ContextVar[TaskHost | None] = ContextVar("perdure_mcp_task_host", default=None)


@contextlib.contextmanager
def hosting(host: TaskHost) -> Iterator[None]:
    """Calls made inside record their tasks through `host`."""
    token = _host.set(host)
    try:
        yield
    finally:
        _host.reset(token)


def current_host() -> TaskHost | None:
    return _host.get()


def tasks_extension() -> "ClientExtension":
    """The client side of the extension: declared on every call, its `task` result claimed.
    Every call asks for the handle itself (`allow_claimed`), to record it before it follows
    it; the SDK's own resolution (a call that did not ask) is refused."""
    from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

    from activities.mcp_task_wire import CreatedTask

    async def unrecorded(created: CreatedTask, context: ClaimContext) -> "CallToolResult":
        raise McpTaskFailed(
            f"{context.tool_name}: task {created.task_id} arrived on a call that cannot record "
            "it (activities/mcp_toolbox.py follows tasks itself)"
        )

    class TasksExtension(ClientExtension):
        identifier = EXTENSION

        def claims(self) -> list[ResultClaim[Any]]:
            return [ResultClaim(result_type="task", model=CreatedTask, resolve=unrecorded)]

    return TasksExtension()


async def follow(
    session: "ClientSession",
    server: McpServer,
    seen: TaskSeen,
    host: TaskHost | None,
    answered: frozenset[str] = frozenset(),
) -> "CallToolResult | InputRequiredResult":
    """Poll the task until it ends; its result, as the call's, or the questions it asks a
    person (`input_required`) that are not among those `answered`. Each change of status or
    message is recorded (and so streamed); a cancellation sends `tasks/cancel` first."""
    from mcp.types import CallToolResult

    from activities.mcp_task_wire import asked, cancel_task, get_task

    deadline = seen.started_at + server.task_timeout.total_seconds()
    try:
        while seen.status not in TERMINAL:
            if time.time() > deadline:
                await cancel_quietly(session, seen.task_id, cancel_task)
                raise McpTaskTimedOut(
                    f"MCP server {server.name}: task {seen.task_id} did not finish within "
                    f"{server.task_timeout}; it was cancelled"
                )
            await asyncio.sleep(_poll_seconds(seen.poll_interval_ms))
            detailed = await get_task(session, seen.task_id)
            following = seen.moved_to(detailed.status, detailed.status_message)
            following = following.with_interval(detailed.poll_interval_ms)
            if host is not None and following.shown != seen.shown:
                await host.record([task_chunk(host.tool_call_id, server.name, following)])
            seen = following
            if seen.status in TERMINAL:
                return _ended(server.name, seen, detailed.result, detailed.error, CallToolResult)
            if seen.status == "input_required" and (questions := asked(detailed, answered)):
                return questions  # the turn parks on them; the answers go back by tasks/update
    except asyncio.CancelledError:
        if host is None or not host.handing_over():
            await cancel_quietly(session, seen.task_id, cancel_task)
        raise
    raise McpTaskFailed(f"MCP server {server.name}: task {seen.task_id} had ended ({seen.status})")


async def follow_recorded(
    session: "ClientSession", server: McpServer, host: TaskHost, answers: "InputRound | None"
) -> "CallToolResult | InputRequiredResult":
    """Follow the task an earlier attempt of the call recorded, sending it the person's
    answers to its questions first (`tasks/update`), if the call was parked on them."""
    from activities.mcp_task_wire import update_task

    assert host.known is not None
    if answers is None:
        return await follow(session, server, host.known, host)
    await update_task(session, host.known.task_id, responses_of(answers.answers))
    return await follow(session, server, host.known, host, frozenset(answers.answers))


def _ended(
    name: str,
    seen: TaskSeen,
    result: dict[str, Any] | None,
    error: dict[str, Any] | None,
    result_type: "type[CallToolResult]",
) -> "CallToolResult":
    if seen.status == "completed" and result is not None:
        return result_type.model_validate(result)
    if seen.status == "failed":
        reason = (error or {}).get("message") or seen.status_message or "no reason given"
        raise McpTaskFailed(f"MCP server {name}: task {seen.task_id} failed: {reason}")
    if seen.status == "cancelled":
        raise McpTaskFailed(
            f"MCP server {name}: task {seen.task_id} was cancelled"
            + (f" ({seen.status_message})" if seen.status_message else "")
        )
    raise McpTaskFailed(f"MCP server {name}: task {seen.task_id} completed without a result")


async def cancel_quietly(
    session: "ClientSession",
    task_id: str,
    cancel: Callable[["ClientSession", str, float], Awaitable[None]],
) -> None:
    """`tasks/cancel`, bounded; shielded from the cancellation that asked for it. A server
    that does not answer in time is left to its task's TTL."""
    sending = asyncio.ensure_future(cancel(session, task_id, CANCEL_SECONDS))
    with contextlib.suppress(Exception):
        await asyncio.shield(sending)


def _poll_seconds(interval_ms: int | None) -> float:
    if interval_ms is None:
        return DEFAULT_POLL_SECONDS
    return min(max(interval_ms / 1000, MIN_POLL_SECONDS), MAX_POLL_SECONDS)
