"""Find the agents a worker serves (PERDURE_AGENTS module paths, or the default agent)."""

import importlib
import inspect

from perdure.agent import Agent
from perdure.default_agent import DefaultAgent


class UnknownAgent(LookupError):
    pass


def _refuse_unsupported(agent: Agent) -> None:
    """An option the code accepts either works or is refused: approvals do not work yet."""
    for definition in agent.tools().values():
        if definition.needs_approval:
            raise ValueError(
                f"agent {agent.name!r}: tool {definition.name!r} has needs_approval=True, but "
                "tool approvals are not supported yet; remove needs_approval to serve this agent"
            )


class AgentRegistry:
    def __init__(self, agents: list[Agent]) -> None:
        if not agents:
            raise ValueError("no agents to serve")
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            _refuse_unsupported(agent)
            if agent.name in self._agents:
                raise ValueError(f"two agents are named {agent.name!r}")
            self._agents[agent.name] = agent
        self._first = agents[0]

    def resolve(self, name: str) -> Agent:
        """By name; `default` falls back to the first agent when none is named so."""
        agent = self._agents.get(name)
        if agent is None and name == "default":
            return self._first
        if agent is None:
            known = ", ".join(sorted(self._agents))
            raise UnknownAgent(f"unknown agent {name!r}; this worker serves: {known}")
        return agent

    def names(self) -> list[str]:
        return list(self._agents)


def load_agents(modules: str | None) -> AgentRegistry:
    if not modules:
        return AgentRegistry([DefaultAgent()])
    agents: list[Agent] = []
    for module_path in (m.strip() for m in modules.split(",") if m.strip()):
        module = importlib.import_module(module_path)
        for _, member in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(member, Agent)
                and member is not Agent
                and member.__module__ == module.__name__
            ):
                agents.append(member())
    if not agents:
        raise ValueError(f"PERDURE_AGENTS={modules!r} defines no Agent subclass")
    return AgentRegistry(agents)
