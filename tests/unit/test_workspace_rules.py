"""A workspace's file names, and an agent's choice of workspace tools, checked at the edge."""

import pytest

from perdure import Agent, tool
from perdure.agents_registry import AgentRegistry
from perdure.domain.workspace_rules import BadPath, checked_path


@pytest.mark.parametrize("name", ["a.txt", "src/app.py", "deep/er/still.md", "ünïcode/名前.txt"])
def test_a_relative_name_of_plain_parts_is_a_file_name(name: str) -> None:
    assert checked_path(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "not empty"),
        ("/etc/passwd", "no leading /"),
        ("../up.txt", ". or .. part"),
        ("a/./b", ". or .. part"),
        ("a//b", "empty"),
        ("a/", "empty"),
        ("nul\x00.txt", "control character"),
        ("line\nbreak", "control character"),
        ("win\\dows", "not \\\\"),
        ("x" * 256, "part of a file name is at most 255"),
        ("/".join(["x" * 200] * 3), "at most 512 bytes"),
    ],
)
def test_a_name_that_could_leave_the_workspace_or_mislead_is_refused(name: str, why: str) -> None:
    with pytest.raises(BadPath, match=why):
        checked_path(name)


def test_an_agent_naming_an_unknown_workspace_tool_is_refused_at_load() -> None:
    class Typo(Agent):
        name = "typo"
        workspace_tools = ("read_file", "rm_rf")

    with pytest.raises(ValueError, match="names no workspace tool rm_rf"):
        AgentRegistry([Typo()])


def test_an_approval_on_a_workspace_tool_not_offered_is_refused_at_load() -> None:
    class Loose(Agent):
        name = "loose"
        workspace_tools = ("read_file",)
        workspace_approval = ("delete_file",)

    with pytest.raises(ValueError, match="workspace_approval names tools it does not offer"):
        AgentRegistry([Loose()])


def test_an_own_tool_named_as_a_workspace_tool_is_refused_at_load() -> None:
    class Clash(Agent):
        name = "clash"
        workspace_tools = True

        @tool
        async def grep(self, pattern: str) -> str:
            """Mine."""
            return pattern

    with pytest.raises(ValueError, match="two tools are named 'grep'"):
        AgentRegistry([Clash()])
