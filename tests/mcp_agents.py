"""Agents that take tools from a real MCP server process (tests/mcp_servers/calc.py)."""

import socket
import sys
from datetime import timedelta
from pathlib import Path

from perdure import Agent, McpServer

SERVER_SCRIPT = Path(__file__).parent / "mcp_servers" / "calc.py"
HTTP_LISTENER = socket.create_server(("127.0.0.1", 0))
"""Bound here, served by the HTTP calc server a spec starts (it inherits the socket): the
agents below know its URL before any server runs, and no other program can take the port."""
HTTP_URL = f"http://127.0.0.1:{HTTP_LISTENER.getsockname()[1]}/mcp"

CALC = McpServer(
    name="calc",
    command=[sys.executable, str(SERVER_SCRIPT)],
    env_from_env={"CALC_RECORD_FILE": "PERDURE_TEST_MCP_RECORD_FILE"},
    idempotent=["add"],
)


class McpCalcAgent(Agent):
    name = "mcp-calc"
    mcp_servers = (CALC,)


class McpLegacyAgent(Agent):
    """The calc server as a server from before the 2026-07-28 protocol (the handshake)."""

    name = "mcp-legacy"
    mcp_servers = (
        McpServer(
            name="old",
            command=[*CALC.command, "legacy"],
            env_from_env=CALC.env_from_env,
            idempotent=CALC.idempotent,
        ),
    )


class McpApprovalAgent(Agent):
    """`record` waits for a person's approval."""

    name = "mcp-approve"
    mcp_servers = (
        McpServer(
            name="calc",
            command=CALC.command,
            env_from_env=CALC.env_from_env,
            needs_approval=["rec*"],
        ),
    )


def calc_asking(input_timeout: timedelta) -> McpServer:
    """The calc server whose `sign_up` asks a person, its request state sealed with a key from
    the worker's environment (a server started again reads what the last one sealed)."""
    return McpServer(
        name="calc",
        command=CALC.command,
        env_from_env={**CALC.env_from_env, "CALC_STATE_KEY": "PERDURE_TEST_MCP_STATE_KEY"},
        input_timeout=input_timeout,
    )


class McpInputAgent(Agent):
    name = "mcp-input"
    mcp_servers = (calc_asking(timedelta(minutes=10)),)


class McpHastyInputAgent(Agent):
    """Waits 2 s for an answer to the server's question."""

    name = "mcp-input-hasty"
    mcp_servers = (calc_asking(timedelta(seconds=2)),)


class McpIdempotentInputAgent(Agent):
    """`sign_up` taken for idempotent: the model step runs its call in a tool round."""

    name = "mcp-input-idempotent"
    mcp_servers = (
        McpServer(
            name="calc",
            command=CALC.command,
            env_from_env=calc_asking(timedelta(minutes=10)).env_from_env,
            idempotent=["sign_up"],
        ),
    )


class McpApprovedInputAgent(Agent):
    """`sign_up` needs an approval first, then asks."""

    name = "mcp-input-approve"
    mcp_servers = (
        McpServer(
            name="calc",
            command=CALC.command,
            env_from_env=calc_asking(timedelta(minutes=10)).env_from_env,
            needs_approval=["sign_up"],
        ),
    )


class McpDownAgent(Agent):
    """Its server's command fails at once: a server that is down."""

    name = "mcp-down"
    mcp_servers = (McpServer(name="gone", command=[sys.executable, "-c", "raise SystemExit(2)"]),)


def calc_over_http(token_variable: str) -> McpServer:
    """The calc server over HTTP, its `Authorization` header read from `token_variable`."""
    return McpServer(
        name="calchttp", url=HTTP_URL, headers_from_env={"Authorization": token_variable}
    )


class McpHttpAgent(Agent):
    name = "mcp-http"
    mcp_servers = (calc_over_http("PERDURE_TEST_MCP_AUTHORIZATION"),)


class McpHttpNoKeyAgent(Agent):
    """Declares the HTTP server with a header whose variable is not set: refused (401)."""

    name = "mcp-http-no-key"
    mcp_servers = (calc_over_http("PERDURE_TEST_MCP_UNSET_VARIABLE"),)
