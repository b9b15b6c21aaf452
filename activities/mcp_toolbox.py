"""A worker's connections to its agents' MCP servers and their tool lists (the tools a turn
offers are `activities/turn_tools.py`'s). docs/mcp.md."""

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from activities.mcp_input import STATE_ONLY_ROUNDS, InputRound, responses_of
from activities.mcp_results import call_output, core_result, state_only
from activities.mcp_tasks import (
    cancel_quietly,
    current_host,
    follow,
    follow_recorded,
    tasks_extension,
)
from perdure.domain.conversation import ToolSpec
from perdure.domain.mcp_tasks import task_chunk
from perdure.mcp_servers import McpServer, ServerKey, exposed_name
from perdure.tools import ToolContext

if TYPE_CHECKING:  # the SDK is imported at the worker's start (`import_mcp_sdk`)
    from mcp import Client
    from mcp.client.session import IncomingMessage
    from mcp.client.stdio import StdioServerParameters

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
"""A server that does not answer its handshake within this is down (a tool error)."""
LIST_PAGES = 50
"""Pages of a tool list read at most: a server whose cursor never ends cannot hold a step."""
DOWN_PAUSE = 5.0
"""How long a server that could not be connected to is taken for down without trying again:
the steps and calls of that time get its error at once, instead of each waiting up to
`CONNECT_TIMEOUT` for a handshake that will not come."""
RELISTEN_DELAY = 1.0
"""After a server ends its stream of list changes, the pause before it is opened again."""


class McpServerError(Exception):
    """A server that could not be reached, timed out or broke its connection."""


@dataclass(frozen=True)
class McpTool:
    """One tool of an MCP server, as the model sees it (a `perdure.tools.Tool`)."""

    toolbox: "McpToolbox"
    server: McpServer
    remote_name: str
    name: str
    description: str
    parameters: dict[str, Any]
    idempotent: bool
    needs_approval: bool
    approval_timeout: timedelta
    answers: InputRound | None = None
    """The person's answers to the server's last questions, sent with this call's retry."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    async def approval_needed(self, arguments: dict[str, Any], context: ToolContext) -> bool:
        return self.needs_approval

    def answering(self, answers: InputRound) -> "McpTool":
        """This tool, its next call sending `answers` (docs/mcp.md#input-required)."""
        return replace(self, answers=answers)

    async def invoke(self, owner: object, arguments: dict[str, Any], context: ToolContext) -> Any:
        """The output, or `InputAsked` when the server asks a person first."""
        return await self.toolbox.call(self.server, self.remote_name, arguments, self.answers)


@dataclass(frozen=True)
class _RemoteTool:
    name: str
    description: str | None
    schema: dict[str, Any]
    hinted_idempotent: bool = False
    """The server marks it `readOnlyHint` or `idempotentHint` (its annotations)."""


@dataclass
class _Listing:
    """What the server listed. Shared by every agent declaring the same server (one process);
    each declaration's own flags (idempotent, approval) are applied when its tools are made."""

    tools: list[_RemoteTool]
    read_at: float
    changes: int
    """The server's announced list changes counted when this read began: a change heard
    during the read makes it stale too."""


class _Connection:
    """One server's client. The SDK's client is entered and left in one task (anyio's task
    groups), so a task of its own holds it open until `close`.

    It hears the server say its tool list changed, and calls `list_changed`: on a 2026-07-28
    connection through a `subscriptions/listen` stream it keeps open, on an older one through
    the `notifications/tools/list_changed` the server sends unasked."""

    def __init__(self, server: McpServer, list_changed: Callable[[], None]) -> None:
        self.server = server
        self._list_changed = list_changed
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._failure: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._ended = False
        """The server's side of the connection ended (a stdio server's output closed: it died)."""

    async def client(self) -> "Client":
        if self._task is None:
            self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.server.name}")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await self._ready.wait()
        except TimeoutError:
            raise McpServerError(
                f"MCP server {self.server.name} did not answer within {CONNECT_TIMEOUT:g} s"
            ) from None
        if self._client is None:
            raise McpServerError(
                f"MCP server {self.server.name} is unreachable: {_described(self._failure)}"
            )
        return self._client

    @property
    def broken(self) -> bool:
        """Unusable: it failed or closed, or its server's side ended (opened again at the next
        use, so a server that died between two turns is started again before it is used)."""
        return self._ended or (self._task is not None and self._task.done())

    def _server_side_ended(self) -> None:
        self._ended = True

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(
                        await self._target(stack),
                        message_handler=self._heard,
                        extensions=[tasks_extension()],
                    )
                )
                self._client = client
                self._ready.set()
                following = asyncio.create_task(
                    self._follow_changes(client), name=f"mcp-{self.server.name}-changes"
                )
                try:
                    await self._closing.wait()
                finally:
                    following.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await following
        except Exception as error:  # noqa: BLE001 - reported to whoever waits, as a tool error
            self._failure = error
        finally:
            self._client = None
            self._ready.set()

    async def _heard(self, message: "IncomingMessage") -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._list_changed()

    async def _follow_changes(self, client: "Client") -> None:
        """On a 2026-07-28 connection, hear every change of the tool list on a listen stream;
        one that ends is opened again (it replays nothing: the listing counts as changed)."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            while True:
                async with client.listen(tools_list_changed=True) as changes:
                    async for _change in changes:
                        self._list_changed()
                self._list_changed()
                await asyncio.sleep(RELISTEN_DELAY)
        except ListenNotSupportedError:
            return  # an older server announces changes unasked (`_heard`)
        except Exception as error:  # noqa: BLE001 - the listing still ages out
            self._list_changed()
            log.warning(
                "MCP server %s: its tool list changes cannot be heard (%s: %s); the list is "
                "read again every %s",
                self.server.name,
                type(error).__name__,
                error,
                self.server.list_max_age,
            )

    async def _target(self, stack: contextlib.AsyncExitStack) -> Any:
        """What `mcp.Client` connects to: the stdio command, or the HTTP transport with its
        headers (values read here, in the worker, never passed anywhere else)."""
        server = self.server
        if server.url is None:
            from mcp.client.stdio import StdioServerParameters

            command, *args = server.command
            environment = _from_environment(server.env_from_env)
            parameters = StdioServerParameters(command=command, args=args, env=environment or None)
            return _watched_stdio(parameters, self._server_side_ended)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=_from_environment(server.headers_from_env),
                timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=_seconds(server.call_timeout)),
            )
        )
        return streamable_http_client(server.url, http_client=http)

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task


@dataclass
class McpToolbox:
    """Per worker process: one connection per server (kept open: a stdio server takes a second
    or more to start), each server's tool list cached for its `list_max_age`, until the server
    says it changed, or until its connection is opened again."""

    _connections: dict[ServerKey, _Connection] = field(default_factory=dict)
    _listings: dict[ServerKey, _Listing] = field(default_factory=dict)
    _locks: dict[ServerKey, asyncio.Lock] = field(default_factory=dict)
    _changes: dict[ServerKey, int] = field(default_factory=dict)
    """List changes each server announced so far."""
    _down: dict[ServerKey, tuple[float, str]] = field(default_factory=dict)
    """When each server last failed to connect, and its error (`DOWN_PAUSE`)."""

    async def tools(self, server: McpServer) -> list[McpTool]:
        """The server's tools as this declaration offers them."""
        listing = await self._listing(server)
        return _unique(server, [self._tool(server, remote) for remote in listing.tools])

    async def _listing(self, server: McpServer) -> _Listing:
        listing = self._listings.get(server.key)
        if listing is not None and self._current(server, listing):
            return listing
        async with self._locks.setdefault(server.key, asyncio.Lock()):
            listing = self._listings.get(server.key)
            if listing is None or not self._current(server, listing):
                changes, read_at = self._changes.get(server.key, 0), time.monotonic()
                listing = _Listing(await self._read_list(server), read_at, changes)
                self._listings[server.key] = listing
        return listing

    def _current(self, server: McpServer, listing: _Listing) -> bool:
        """Neither older than the declaration's `list_max_age` nor changed since it was read."""
        return listing.changes == self._changes.get(
            server.key, 0
        ) and time.monotonic() - listing.read_at < _seconds(server.list_max_age)

    def _list_changed(self, key: ServerKey) -> None:
        self._changes[key] = self._changes.get(key, 0) + 1

    async def _read_list(self, server: McpServer) -> list[_RemoteTool]:
        client = await self._client(server)
        found: list[_RemoteTool] = []
        cursor: str | None = None
        try:
            for _ in range(LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                found += [
                    _RemoteTool(
                        tool.name,
                        tool.description,
                        tool.input_schema,
                        hinted_idempotent=_hinted_idempotent(tool.annotations),
                    )
                    for tool in page.tools
                ]
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as error:
            await self._drop(server)
            raise McpServerError(
                f"MCP server {server.name}: listing its tools failed: {error}"
            ) from error
        return found

    def _tool(self, server: McpServer, remote: _RemoteTool) -> McpTool:
        return McpTool(
            toolbox=self,
            server=server,
            remote_name=remote.name,
            name=exposed_name(server.name, remote.name),
            description=remote.description or remote.name,
            parameters=remote.schema,
            idempotent=server.is_idempotent(remote.name, hinted=remote.hinted_idempotent),
            needs_approval=server.needs_approval_for(remote.name),
            approval_timeout=server.approval_timeout,
        )

    async def call(
        self,
        server: McpServer,
        tool: str,
        arguments: dict[str, Any],
        answers: InputRound | None = None,
    ) -> Any:
        """The tool's output, or the questions the server asks a person (`InputAsked`). A call
        the server turns into a task is followed to its end (activities/mcp_tasks.py), also when
        an earlier attempt of the call recorded the task."""
        from activities.mcp_task_wire import CreatedTask

        client = await self._client(server)
        host = current_host()
        if host is not None and host.known is not None:
            followed = await follow_recorded(client.session, server, host, answers)
            return call_output(server, tool, followed)
        state = answers.request_state if answers else None
        responses = responses_of(answers.answers) if answers else None
        try:
            for _ in range(STATE_ONLY_ROUNDS):
                result = await client.session.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=_seconds(server.call_timeout),
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                    allow_claimed=True,
                )
                if isinstance(result, CreatedTask):
                    break
                state, responses = state_only(core_result(server, tool, result)), None
                if state is None:
                    break
        except Exception as error:
            await self._drop(server)  # the next call connects again
            raise McpServerError(
                f"MCP server {server.name}: {type(error).__name__}: {error}"
            ) from error
        if isinstance(result, CreatedTask):
            seen = result.seen()
            if host is not None:  # before the first poll: a crash from here on follows it
                await host.record([task_chunk(host.tool_call_id, server.name, seen)])
            return call_output(server, tool, await follow(client.session, server, seen, host))
        return call_output(server, tool, core_result(server, tool, result))

    async def cancel_task(self, server: McpServer, task_id: str) -> None:
        """`tasks/cancel` for a task no call follows any more (its turn ended), bounded; a
        server that cannot be reached is left to the task's TTL."""
        from activities.mcp_task_wire import cancel_task

        try:
            client = await self._client(server)
        except McpServerError as error:
            log.warning("MCP server %s: task %s not cancelled: %s", server.name, task_id, error)
            return
        await cancel_quietly(client.session, task_id, cancel_task)

    async def _client(self, server: McpServer) -> "Client":
        down = self._down.get(server.key)
        if down is not None and time.monotonic() - down[0] < DOWN_PAUSE:
            raise McpServerError(f"{down[1]} (tried again after {DOWN_PAUSE:g} s)")
        connection = self._connections.get(server.key)
        if connection is not None and connection.broken:
            log.info("MCP server %s: its connection ended; connecting again", server.name)
            await self._drop(server)  # its tools are listed again on the new connection
            connection = None
        if connection is None:
            connection = _Connection(server, lambda: self._list_changed(server.key))
            self._connections[server.key] = connection
        try:
            client = await connection.client()
        except McpServerError as error:
            self._down[server.key] = (time.monotonic(), str(error))
            await self._drop(server)
            raise
        self._down.pop(server.key, None)
        return client

    async def _drop(self, server: McpServer) -> None:
        connection = self._connections.pop(server.key, None)
        self._listings.pop(server.key, None)
        if connection is not None:
            await connection.close()

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            await self._drop(connection.server)


@contextlib.asynccontextmanager
async def _watched_stdio(
    parameters: "StdioServerParameters", ended: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport, its server's output watched: `ended()` once it closes (the
    process exited), so the connection is known dead before its next use, not by it."""
    from mcp.client.stdio import stdio_client

    async with stdio_client(parameters) as (read_stream, write_stream):
        yield _WatchedStream(read_stream, ended), write_stream


class _WatchedStream:
    """A receive stream that calls `ended()` when it ends, for the SDK's dispatcher (which
    enters it, iterates it and reads an optional `last_context`)."""

    def __init__(self, stream: Any, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._ended = ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> "_WatchedStream":
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        self._ended()
        return await self._stream.__aexit__(*exc_info)

    def __aiter__(self) -> "_WatchedStream":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except StopAsyncIteration:
            self._ended()
            raise


def _from_environment(names: Mapping[str, str]) -> dict[str, str]:
    """Each key's value from the worker's environment variable named by it (absent: left out)."""
    return {key: value for key, variable in names.items() if (value := os.environ.get(variable))}


def import_mcp_sdk() -> None:
    """Import the MCP SDK now, at a worker's start: a second of CPU that, imported with the
    first server a chat's step connects to, would hold every other chat's stream."""
    import mcp.client.stdio
    import mcp.client.streamable_http
    import mcp.types  # noqa: F401


def _unique(server: McpServer, tools: list[McpTool]) -> list[McpTool]:
    """Two remote tools that would reach the model under one name are both left out (logged):
    neither may silently take the other's calls."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool.name] = counts.get(tool.name, 0) + 1
    for name, count in counts.items():
        if count > 1:
            log.warning(
                "MCP server %s: %d tools map to %s; none is offered", server.name, count, name
            )
    return [tool for tool in tools if counts[tool.name] == 1]


def _hinted_idempotent(annotations: Any) -> bool:
    """`readOnlyHint` (no effect to repeat) or `idempotentHint` (repeating adds none)."""
    if annotations is None:
        return False
    return bool(annotations.read_only_hint) or bool(annotations.idempotent_hint)


def _seconds(span: timedelta) -> float:
    return span.total_seconds()


def _described(error: BaseException | None) -> str:
    """The error's text, or its class where it has none (a closed stream says nothing)."""
    if error is None:
        return "it closed the connection"
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _described(error.exceptions[0])
    return str(error) or type(error).__name__
