"""A real MCP server, built with the `mcp` SDK, for the MCP specs: over stdio, or
`calc.py http <fd> <token>`: streamable HTTP on the listening socket inherited as `fd`,
answering only requests that carry `Authorization: Bearer <token>` (401 otherwise), or
`calc.py legacy`: over stdio as a server from before the 2026-07-28 protocol, which knows no
`server/discover` (clients fall back to the `initialize` handshake).

`record` appends to the file named by CALC_RECORD_FILE (each call once), so a spec can count
how often a call really ran; `crash` ends the process mid-call, as a killed server does;
`slow_lookup` is marked `readOnlyHint` (a worker may run it again after a crash); `learn` adds
a tool and announces that the list changed, as each protocol version does; `pid`
names the process (a spec kills it between turns); `fail` answers with `isError`;
`sign_up` asks a person twice before it answers (the 2026-07-28 `input_required` result): a
name, then a confirmation, its request state sealed with CALC_STATE_KEY when that is set (a
restarted server reads what its predecessor sealed), else with a key of the process's own.
"""

import json
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

STATE_KEY = os.environ.get("CALC_STATE_KEY")
app = MCPServer(
    "calc",
    request_state_security=RequestStateSecurity(keys=[STATE_KEY]) if STATE_KEY else None,
)


@app.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@app.tool()
def record(text: str) -> str:
    """Record a line (not idempotent)."""
    with open(os.environ["CALC_RECORD_FILE"], "a") as file:
        file.write(text + "\n")
    return f"recorded {text}"


@app.tool()
async def slow_record(text: str, seconds: float) -> str:
    """Record a line, then take `seconds` to answer (not idempotent)."""
    with open(os.environ["CALC_RECORD_FILE"], "a") as file:
        file.write(text + "\n")
    await anyio.sleep(seconds)
    return f"recorded {text}"


@app.tool()
async def learn(name: str, ctx: Context) -> str:
    """Add a tool `name` that multiplies two whole numbers."""

    def multiply(a: int, b: int) -> int:
        return a * b

    app.add_tool(multiply, name=name, description="Multiply two whole numbers.")
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()  # to the `subscriptions/listen` streams open
    else:
        await ctx.session.send_tool_list_changed()  # unasked, to the connection
    return f"learned {name}"


@app.tool()
def crash() -> str:
    """End the server in the middle of the call."""
    os._exit(3)


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow_lookup(text: str, seconds: float) -> str:
    """Look a line up, marked read-only: the first call for `text` takes `seconds`, later ones
    answer at once (each call is recorded, for a spec to count)."""
    with open(os.environ["CALC_RECORD_FILE"], "a+") as file:
        file.seek(0)
        seen = text in file.read().splitlines()
        file.write(text + "\n")
    if not seen:
        await anyio.sleep(seconds)
    return f"found {text}"


def _ask(
    key: str, message: str, field: str, kind: str, state: dict[str, str]
) -> InputRequiredResult:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    request = ElicitRequest(
        params=ElicitRequestFormParams(message=message, requested_schema=schema)
    )
    return InputRequiredResult(input_requests={key: request}, request_state=json.dumps(state))


@app.tool()
async def sign_up(plan: str, ctx: Context) -> str | InputRequiredResult:
    """Sign a person up for `plan`: asks their name, then to confirm; records the sign-up."""
    answers = ctx.input_responses or {}
    state: dict[str, str] = json.loads(ctx.request_state) if ctx.request_state else {}
    answer = next(iter(answers.values()), None)
    if isinstance(answer, ElicitResult) and answer.action != "accept":
        return f"not signed up: {answer.action}"
    if "name" in answers and isinstance(answer, ElicitResult) and answer.content:
        name = str(answer.content["name"])
        return _ask("confirm", f"Sign {name} up for {plan}?", "confirm", "boolean", {"name": name})
    if "confirm" in answers and isinstance(answer, ElicitResult) and answer.content:
        if answer.content.get("confirm") is not True:
            return "not signed up: not confirmed"
        with open(os.environ["CALC_RECORD_FILE"], "a") as file:
            file.write(f"signed up {state['name']}\n")
        return f"signed up {state['name']} for {plan}"
    return _ask("name", "What is your name?", "name", "string", {})


@app.tool()
def pid() -> int:
    """The server's process id (a spec kills it between two turns)."""
    return os.getpid()


@app.tool()
def fail(reason: str) -> str:
    """Fail the call: the server answers it with `isError`."""
    raise ValueError(reason)


def serve_legacy() -> None:
    """Over stdio in the SDK's handshake-only loop (`serve_loop`): a `server/discover` probe
    is refused as unknown, as a server written before 2026-07-28 refuses it."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    server = app._lowlevel_server  # the SDK's one way to a handshake-only stdio server

    async def serve() -> None:
        async with stdio_server() as (read, write), server.lifespan(server) as state:
            options = server.create_initialization_options()
            await serve_loop(server, read, write, lifespan_state=state, init_options=options)

    anyio.run(serve)


def serve_http(fd: int, token: str) -> None:
    import socket

    import uvicorn

    inner = app.streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await inner(scope, receive, send)

    # A client's `subscriptions/listen` stream never ends by itself: a stop closes it after 2 s,
    # as a deployed server's shutdown would, instead of waiting for the client to hang up.
    config = uvicorn.Config(
        guarded, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    anyio.run(server.serve, [socket.socket(fileno=fd)])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "http":
        serve_http(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:] == ["legacy"]:
        serve_legacy()
    else:
        app.run()
