"""A real MCP server over stdio, built with the `mcp` SDK, for the MCP specs.

`record` appends to the file named by CALC_RECORD_FILE (each call once), so a spec can count
how often a call really ran; `crash` ends the process mid-call, as a killed server does.
"""

import os

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
def crash() -> str:
    """End the server in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    app.run()
