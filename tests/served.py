"""What the test stacks and clusters serve: the agents of these modules (PERDURE_AGENTS),
importable from the repository's root."""

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STACK_AGENTS = "tests.agents,tests.approval_agents,tests.delegating_agents,tests.hygiene_agents,tests.mcp_agents"


@dataclass(frozen=True)
class Served:
    agents: str = "tests.agents,tests.approval_agents,tests.delegating_agents"
    root: Path = ROOT


CLUSTER = Served()
