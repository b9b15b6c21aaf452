"""The tools a turn's model may call, one owner for the model step, the tool call, park and
resume: the agent's own, the built-in workspace tools it opted into, its MCP servers'."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from activities.mcp_toolbox import McpServerError, McpToolbox
from activities.workspace_tools import WorkspaceTools
from perdure.agent import Agent
from perdure.mcp_servers import SEPARATOR
from perdure.tools import Tool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSources:
    """Per worker process: where a turn's tools come from besides its agent's own methods."""

    mcp: McpToolbox
    workspace: WorkspaceTools


@dataclass(frozen=True)
class TurnTools:
    """The tools a turn's model may call, and the servers that could not list theirs."""

    tools: Mapping[str, Tool]
    unreachable: Mapping[str, str]
    """Server name → why its tools are missing (its calls get this as their error)."""

    def missing(self, name: str) -> str:
        """The tool error for a call of `name`, which is not among `tools`."""
        server, separator, _ = name.partition(SEPARATOR)
        if separator and server in self.unreachable:
            return self.unreachable[server]
        return f"unknown tool {name!r}"


def local_tools(agent: Agent, workspace: WorkspaceTools) -> dict[str, Tool]:
    """The agent's own tools and its built-in workspace tools: those known without I/O."""
    tools: dict[str, Tool] = dict(agent.tools())
    tools.update(workspace.for_agent(agent))
    return tools


async def turn_tools(agent: Agent, sources: ToolSources) -> TurnTools:
    """The agent's own tools, its built-in workspace tools and its MCP servers' (a server that
    cannot list its tools is left out of this step, logged; the turn goes on)."""
    tools = local_tools(agent, sources.workspace)
    unreachable: dict[str, str] = {}
    for server in agent.mcp_servers:
        try:
            listed = await sources.mcp.tools(server)
        except McpServerError as error:
            log.warning("%s; its tools are not offered this step", error)
            unreachable[server.name] = str(error)
            continue
        tools.update((tool.name, tool) for tool in listed)
    return TurnTools(tools=tools, unreachable=unreachable)
