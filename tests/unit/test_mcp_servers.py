"""MCP server declarations (perdure/mcp_servers.py): what an agent may declare, and the names
its servers' tools reach the model under."""

import sys
from datetime import timedelta

import pytest

from perdure import Agent, McpServer, tool
from perdure.agents_registry import AgentRegistry
from perdure.mcp_servers import exposed_name
from perdure.tools import TOOL_NAME

COMMAND = [sys.executable, "server.py"]


def test_a_servers_tool_reaches_the_model_as_server__tool() -> None:
    assert exposed_name("calc", "add") == "calc__add"


def test_a_tool_name_with_characters_providers_refuse_is_rewritten_and_never_meets_another() -> (
    None
):
    dotted, underscored = exposed_name("fs", "read.file"), exposed_name("fs", "read_file")

    assert TOOL_NAME.match(dotted)
    assert underscored == "fs__read_file"
    assert dotted != underscored


def test_a_long_tool_name_is_cut_to_64_characters_that_keep_two_names_apart() -> None:
    first, second = exposed_name("srv", "x" * 80 + "a"), exposed_name("srv", "x" * 80 + "b")

    assert len(first) == len(second) == 64
    assert first != second
    assert TOOL_NAME.match(first)


@pytest.mark.parametrize("name", ["", "has_underscore", "x" * 21, "spa ce"])
def test_a_server_name_outside_1_to_20_of_letters_digits_and_dashes_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="a name is 1-20"):
        McpServer(name=name, command=COMMAND)


@pytest.mark.parametrize("command", ["python server.py", ["python", ""]])
def test_a_command_that_is_not_a_list_of_words_is_refused(command: object) -> None:
    with pytest.raises(ValueError, match="non-empty list of strings"):
        McpServer(name="calc", command=command)  # type: ignore[arg-type]


def test_a_server_is_either_a_command_or_a_url() -> None:
    with pytest.raises(ValueError, match="either `command` .stdio. or `url` .HTTP."):
        McpServer(name="calc")
    with pytest.raises(ValueError, match="either"):
        McpServer(name="calc", command=COMMAND, url="https://mcp.example.com/mcp")


@pytest.mark.parametrize("url", ["ftp://host/mcp", "mcp.example.com", "https://"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="http:// or https:// URL"):
        McpServer(name="calc", url=url)


def test_headers_go_with_a_url_and_environment_variables_with_a_command() -> None:
    with pytest.raises(ValueError, match="`headers_from_env` is for an HTTP server"):
        McpServer(name="calc", command=COMMAND, headers_from_env={"Authorization": "TOKEN"})
    with pytest.raises(ValueError, match="`env_from_env` is for a stdio server"):
        McpServer(name="calc", url="https://mcp.example.com/mcp", env_from_env={"A": "B"})


@pytest.mark.parametrize(
    "limits",
    [
        {"call_timeout": timedelta(0)},
        {"call_timeout": timedelta(hours=1)},
        {"list_max_age": timedelta(days=2)},
        {"approval_timeout": timedelta(days=400)},
    ],
)
def test_unbounded_or_empty_time_limits_are_refused(limits: dict[str, timedelta]) -> None:
    with pytest.raises(ValueError, match="must be above 0 and at most"):
        McpServer(name="calc", command=COMMAND, **limits)


def test_idempotent_and_approval_take_names_or_patterns() -> None:
    server = McpServer(
        name="fs", command=COMMAND, idempotent=["read_*", "list"], needs_approval=["delete_*"]
    )

    assert server.is_idempotent("read_file") and server.is_idempotent("list")
    assert not server.is_idempotent("write_file")
    assert server.needs_approval_for("delete_file")
    assert not server.needs_approval_for("read_file")
    assert McpServer(name="fs", command=COMMAND, needs_approval=True).needs_approval_for("x")


def test_a_tool_the_server_hints_read_only_or_idempotent_is_retried_unless_said_otherwise() -> None:
    server = McpServer(name="fs", command=COMMAND, not_idempotent=["write_*"])

    assert server.is_idempotent("read_file", hinted=True)
    assert not server.is_idempotent("read_file")
    assert not server.is_idempotent("write_file", hinted=True)


def test_not_idempotent_wins_over_an_idempotent_pattern() -> None:
    server = McpServer(name="fs", command=COMMAND, idempotent=["*"], not_idempotent=["pay"])

    assert server.is_idempotent("read_file")
    assert not server.is_idempotent("pay", hinted=True)


def test_a_tool_both_idempotent_and_not_is_refused() -> None:
    with pytest.raises(ValueError, match="pay is both `idempotent` and `not_idempotent`"):
        McpServer(name="fs", command=COMMAND, idempotent=["pay"], not_idempotent=["pay"])


def test_an_agent_with_two_servers_of_one_name_is_refused_at_load() -> None:
    class Twice(Agent):
        name = "twice"
        mcp_servers = (McpServer(name="a", command=COMMAND), McpServer(name="a", command=COMMAND))

    with pytest.raises(ValueError, match="two MCP servers are named 'a'"):
        AgentRegistry([Twice()])


def test_an_own_tool_that_takes_a_servers_prefix_is_refused_at_load() -> None:
    class Clash(Agent):
        name = "clash"
        mcp_servers = (McpServer(name="calc", command=COMMAND),)

        @tool
        async def calc__add(self, a: int, b: int) -> int:
            """Add."""
            return a + b

    with pytest.raises(ValueError, match="starts with 'calc__'"):
        AgentRegistry([Clash()])
