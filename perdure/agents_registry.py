"""Find the agents a worker serves (PERDURE_AGENTS module paths, or the default agent)."""

import importlib
import inspect

from perdure.agent import Agent
from perdure.default_agent import DefaultAgent
from perdure.domain.concurrency import MAX_DEBOUNCE_MS, STRATEGIES, Concurrency
from perdure.domain.model_rules import Family, refusals, rules_for
from perdure.domain.workspace_rules import CHANGING_TOOLS, WORKSPACE_TOOLS, chosen_tools
from perdure.mcp_servers import check_servers


class UnknownAgent(LookupError):
    pass


def _check_tools(agent: Agent) -> None:
    """A model sees one tool per name: client tools and sub-agents may not shadow another, and
    no other tool may take an MCP server's prefix."""
    seen = set(agent.tools())
    workspace = chosen_tools(agent.name, agent.workspace_tools, WORKSPACE_TOOLS, "workspace_tools")
    approved = chosen_tools(
        agent.name, agent.workspace_approval, CHANGING_TOOLS, "workspace_approval"
    )
    if not set(approved) <= set(workspace):
        raise ValueError(
            f"agent {agent.name!r}: workspace_approval names tools it does not offer: "
            f"{', '.join(sorted(set(approved) - set(workspace)))}"
        )
    extras = (
        [t.name for t in agent.client_tools] + [s.name for s in agent.sub_agents] + [*workspace]
    )
    check_servers(agent.name, agent.mcp_servers, [*seen, *extras])
    for name in extras:
        if name in seen:
            raise ValueError(
                f"agent {agent.name!r}: two tools are named {name!r} (a client tool's, "
                "sub-agent's or workspace tool's name must differ from every other tool's)"
            )
        seen.add(name)


def _check_limits(agent: Agent) -> None:
    rounds = agent.step_tool_rounds
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(
            f"agent {agent.name!r}: step_tool_rounds must be a whole number of at least 0 "
            f"(0: every tool call runs as its own activity), not {rounds!r}"
        )
    if not isinstance(agent.head_start, bool):
        raise ValueError(
            f"agent {agent.name!r}: head_start must be True or False, not {agent.head_start!r}"
        )
    limit = agent.max_persisted_messages
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(
            f"agent {agent.name!r}: max_persisted_messages must be None (keep every message) "
            f"or a whole number of at least 1, not {limit!r}"
        )


def _check_concurrency(agent: Agent) -> None:
    if agent.concurrency not in STRATEGIES:
        raise ValueError(
            f"agent {agent.name!r}: concurrency must be one of {', '.join(STRATEGIES)}, "
            f"not {agent.concurrency!r}"
        )
    milliseconds = agent.debounce.total_seconds() * 1000
    if not 1 <= milliseconds <= MAX_DEBOUNCE_MS:
        raise ValueError(
            f"agent {agent.name!r}: debounce must be between 1 ms and "
            f"{MAX_DEBOUNCE_MS // 1000} s, not {agent.debounce}"
        )


def served_concurrency(agent: Agent) -> Concurrency:
    return Concurrency(agent.concurrency, debounce_ms=round(agent.debounce.total_seconds() * 1000))


class AgentRegistry:
    def __init__(self, agents: list[Agent]) -> None:
        if not agents:
            raise ValueError("no agents to serve")
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            _check_tools(agent)
            _check_limits(agent)
            _check_concurrency(agent)
            if agent.name in self._agents:
                raise ValueError(f"two agents are named {agent.name!r}")
            self._agents[agent.name] = agent
        self._first = agents[0]
        for agent in agents:
            for sub in agent.sub_agents:
                try:
                    self.resolve(sub.agent)
                except UnknownAgent as error:
                    raise ValueError(
                        f"agent {agent.name!r}: sub-agent {sub.name!r}: {error}"
                    ) from None

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

    def models(self, default_model: str) -> set[str]:
        """The model specs of the agents served."""
        return {agent.model or default_model for agent in self._agents.values()}

    def use_mcp(self) -> bool:
        """Whether any agent served declares an MCP server."""
        return any(agent.mcp_servers for agent in self._agents.values())

    def check_models(self, default_model: str, families: dict[str, Family]) -> None:
        """Refuse, before any turn runs, an option an agent's model does not accept (each
        would be a 400 from the provider on every message): ValueError naming them all."""
        for agent in self._agents.values():
            spec = agent.model or default_model
            rules = rules_for(spec, families)
            if rules is None:
                continue
            problems = refusals(rules, agent.thinking(), agent.max_output_tokens)
            if problems:
                raise ValueError(
                    f"agent {agent.name!r} on {spec} ({rules.family} models): "
                    + "; ".join(problems)
                )


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
