"""A worker's MCP toolbox against a real server process: a server that is down is not started
again by every step that needs it."""

import sys
from pathlib import Path

import pytest

from activities import mcp_toolbox
from activities.mcp_toolbox import McpServerError, McpToolbox
from perdure import McpServer


def failing_server(starts: Path) -> McpServer:
    """A server whose command records its start, then exits before its handshake."""
    script = f"open({str(starts)!r}, 'a').write('started '); raise SystemExit(2)"
    return McpServer(name="gone", command=[sys.executable, "-c", script])


async def test_a_server_that_could_not_be_reached_is_not_started_again_within_the_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts"
    server, toolbox = failing_server(starts), McpToolbox()
    try:
        with pytest.raises(McpServerError, match="MCP server gone is unreachable"):
            await toolbox.tools(server)
        with pytest.raises(McpServerError, match="tried again after 5 s"):
            await toolbox.tools(server)
        assert starts.read_text() == "started "

        monkeypatch.setattr(mcp_toolbox, "DOWN_PAUSE", 0.0)
        with pytest.raises(McpServerError, match="MCP server gone is unreachable"):
            await toolbox.tools(server)
        assert starts.read_text() == "started started "
    finally:
        await toolbox.close()
