"""What the test stacks and clusters serve: the agents of these modules (PERDURE_AGENTS),
importable from the repository's root."""

from dataclasses import dataclass
from pathlib import Path

from perdure.testing.agents import PERDURE_AGENTS

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_AGENTS = f"{PERDURE_AGENTS},tests.fiber_agents"
"""The agents the tests share with the benchmarks (`perdure.testing.agents`), and the fibers'."""
STACK_AGENTS = f"{CLUSTER_AGENTS},tests.hygiene_agents,tests.mcp_agents,tests.mcp_task_agents"


@dataclass(frozen=True)
class Served:
    agents: str = CLUSTER_AGENTS
    root: Path = ROOT


CLUSTER = Served()
