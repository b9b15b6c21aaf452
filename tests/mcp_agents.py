"""Agents that take tools from a real MCP server process (tests/mcp_servers/calc.py)."""

import sys
from pathlib import Path

from perdure import Agent, McpServer

CALC = McpServer(
    name="calc",
    command=[sys.executable, str(Path(__file__).parent / "mcp_servers" / "calc.py")],
    env_from_env={"CALC_RECORD_FILE": "PERDURE_TEST_MCP_RECORD_FILE"},
    idempotent=["add"],
)


class McpCalcAgent(Agent):
    name = "mcp-calc"
    mcp_servers = (CALC,)


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


class McpDownAgent(Agent):
    """Its server's command fails at once: a server that is down."""

    name = "mcp-down"
    mcp_servers = (McpServer(name="gone", command=[sys.executable, "-c", "raise SystemExit(2)"]),)
