"""An agent whose MCP server runs its long tool as a task (tests/mcp_servers/jobs.py)."""

import os
import socket
import sys
from pathlib import Path

from perdure import Agent, McpServer

JOBS_SCRIPT = Path(__file__).parent / "mcp_servers" / "jobs.py"
_GIVEN = os.environ.get("PERDURE_TEST_JOBS_URL")
JOBS_LISTENER = None if _GIVEN else socket.create_server(("127.0.0.1", 0))
"""Bound here, served by the jobs server a spec starts (it inherits the socket), unless the
process is told the URL of one (a cluster's workers are)."""
JOBS_URL = _GIVEN or f"http://127.0.0.1:{JOBS_LISTENER.getsockname()[1]}/mcp"  # type: ignore[union-attr]


def jobs_server_command(directory: Path) -> tuple[list[str], int]:
    """The command that serves the jobs server on this process's socket, and the socket's fd
    it inherits."""
    assert JOBS_LISTENER is not None, "this process was given the URL of another's server"
    fd = JOBS_LISTENER.fileno()
    return [sys.executable, str(JOBS_SCRIPT), str(fd), str(directory)], fd


class McpJobsAgent(Agent):
    name = "mcp-jobs"
    mcp_servers = (McpServer(name="jobs", url=JOBS_URL),)
