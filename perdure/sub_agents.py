"""`SubAgent`: another agent, offered to the model as a tool."""

from dataclasses import dataclass

from perdure.domain.conversation import ToolSpec
from perdure.tools import TOOL_NAME

TASK_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task for the sub-agent, with everything it needs to know: "
            "it does not see this conversation.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class SubAgent:
    """The model calls tool `name` with a `task`; agent `agent` answers it in a session of its
    own (a child turn, linked to the call), streamed live into the call's output, and its
    final answer is the tool's result."""

    name: str
    agent: str
    description: str

    def __post_init__(self) -> None:
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"sub-agent tool {self.name!r}: a name is 1-64 of A-Z a-z 0-9 _ -")

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=TASK_SCHEMA)
