"""A real MCP server, built with the `mcp` SDK, for the MCP specs: over stdio, or
`calc.py http <fd> <token>`: streamable HTTP on the listening socket inherited as `fd`,
answering only requests that carry `Authorization: Bearer <token>` (401 otherwise).

`record` appends to the file named by CALC_RECORD_FILE (each call once), so a spec can count
how often a call really ran; `crash` ends the process mid-call, as a killed server does.
"""

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")


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
def crash() -> str:
    """End the server in the middle of the call."""
    os._exit(3)


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

    server = uvicorn.Server(uvicorn.Config(guarded, log_level="warning", lifespan="on"))
    anyio.run(server.serve, [socket.socket(fileno=fd)])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "http":
        serve_http(int(sys.argv[2]), sys.argv[3])
    else:
        app.run()
