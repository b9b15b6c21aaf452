"""The client tools of one turn: the agent's, and those its request declared."""

from collections.abc import Iterable
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from perdure.agent import Agent
from perdure.tools import ClientTool
from storage.tables import SubmissionRow


def turn_client_tools(
    agent: Agent, submission: SubmissionRow, offered: Iterable[str]
) -> dict[str, ClientTool]:
    """By name. A declared tool named like one of the agent's (`offered`: its own and its MCP
    servers') ends the turn with an error that says so: which of the two the model meant
    could not be known."""
    tools = {tool.name: tool for tool in agent.client_tools}
    taken = set(offered) | set(tools) | {sub.name for sub in agent.sub_agents}
    for declared in submission.client_tools or []:
        name = str(declared["name"])
        if name in taken:
            raise ApplicationError(
                f"the request declares a client tool {name!r}, but agent {agent.name!r} has a "
                "tool of that name; rename the request's tool",
                type="ClientToolClash",
                non_retryable=True,
            )
        tools[name] = ClientTool(
            name=name,
            description=str(declared["description"]),
            parameters=dict(declared["parameters"]),
            timeout=timedelta(seconds=float(declared["timeoutSeconds"])),
        )
        taken.add(name)
    return tools
