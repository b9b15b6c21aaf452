"""MCP tools (docs/mcp.md): an agent's model calls the tools of a real MCP server process,
built with the `mcp` SDK, as it calls the agent's own; a server that is down or dies
mid-call is a tool error for the model, and the turn goes on."""

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from perdure.testing.chat_client import Streamed, counting, send
from tests.e2e.test_approvals import answer, request_of, resume_after
from tests.mcp_agents import HTTP_LISTENER, SERVER_SCRIPT


def new_session() -> str:
    return f"mcp-{uuid.uuid4().hex[:12]}"


def tool_output(streamed: Streamed) -> dict[str, object]:
    return next(
        c for c in streamed.chunks if c["type"] in ("tool-output-available", "tool-output-error")
    )


async def test_the_model_calls_an_mcp_servers_tool_and_reads_its_result(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    streamed = await send(http, new_session(), '@tool calc__add {"a": 2, "b": 3}', agent="mcp-calc")

    available = next(c for c in streamed.chunks if c["type"] == "tool-input-available")
    assert available["toolName"] == "calc__add"
    assert tool_output(streamed) == {
        "type": "tool-output-available",
        "toolCallId": available["toolCallId"],
        "output": {"result": 5},
    }
    assert streamed.types()[-1] == "finish"


async def test_a_tool_call_reaches_the_server_once(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    text = f"once-{uuid.uuid4().hex[:8]}"
    streamed = await send(
        http, new_session(), f'@tool calc__record {{"text": "{text}"}}', agent="mcp-calc"
    )

    assert tool_output(streamed)["output"] == {"result": f"recorded {text}"}
    assert record_file.read_text().splitlines().count(text) == 1


@pytest.mark.parametrize(
    ("agent", "server"),
    [("mcp-calc", "calc"), ("mcp-legacy", "old")],
    ids=["listen-stream-2026-07-28", "notification-before-2026"],
)
async def test_a_tool_the_server_adds_is_offered_at_the_next_turn_without_a_restart(
    http: httpx.AsyncClient, record_file: Path, agent: str, server: str
) -> None:
    session, tool = new_session(), f"times_{uuid.uuid4().hex[:8]}"
    learned = await send(http, session, f'@tool {server}__learn {{"name": "{tool}"}}', agent=agent)
    assert tool_output(learned)["output"] == {"result": f"learned {tool}"}

    streamed = await send(http, session, f'@tool {server}__{tool} {{"a": 6, "b": 7}}', agent=agent)

    assert tool_output(streamed)["output"] == {"result": 42}


async def test_a_servers_refusal_of_the_arguments_is_a_tool_error_for_the_model(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    streamed = await send(http, new_session(), '@tool calc__add {"a": "two"}', agent="mcp-calc")

    output = tool_output(streamed)
    assert output["type"] == "tool-output-error"
    assert "validation error" in str(output["errorText"])
    assert "MCP server calc" in str(output["errorText"])
    assert streamed.types()[-1] == "finish"


async def test_a_server_that_dies_mid_call_is_a_tool_error_and_the_next_call_reconnects(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    crashed = await send(http, session, "@tool calc__crash {}", agent="mcp-calc")

    output = tool_output(crashed)
    assert output["type"] == "tool-output-error"
    assert "MCP server calc" in str(output["errorText"])
    assert crashed.types()[-1] == "finish"

    again = await send(http, session, '@tool calc__add {"a": 1, "b": 1}', agent="mcp-calc")
    assert tool_output(again)["output"] == {"result": 2}


async def test_the_tools_of_a_server_that_is_down_are_not_offered_and_the_turn_goes_on(
    http: httpx.AsyncClient,
) -> None:
    streamed = await send(http, new_session(), "@count 3", agent="mcp-down")

    assert streamed.text() == counting(3)
    assert streamed.types()[-1] == "finish"


async def test_an_mcp_tool_that_needs_approval_runs_once_when_approved(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    text = f"approved-{uuid.uuid4().hex[:8]}"
    parked = await send(
        http, session, f'@tool calc__record {{"text": "{text}"}}', agent="mcp-approve"
    )
    assert parked.types()[-3:] == ["tool-approval-request", "finish-step", "finish"]
    assert not record_file.exists() or text not in record_file.read_text()

    answered = await answer(http, session, request_of(parked)["approvalId"], approved=True)
    continued = await resume_after(http, session, parked)

    assert answered.status_code == 200, answered.text
    assert tool_output(continued)["output"] == {"result": f"recorded {text}"}
    assert continued.chunks[-1]["finishReason"] == "stop"
    assert record_file.read_text().splitlines().count(text) == 1


@pytest.fixture(scope="session")
def http_server() -> Iterator[None]:
    """The calc server over streamable HTTP, on the socket tests/mcp_agents.py bound, with a
    bearer token the worker sends from its environment."""
    token = uuid.uuid4().hex
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "http", str(HTTP_LISTENER.fileno()), token],
        pass_fds=[HTTP_LISTENER.fileno()],
    )
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PERDURE_TEST_MCP_AUTHORIZATION", f"Bearer {token}")
            yield
    finally:
        process.terminate()
        process.wait(10)


async def test_a_streamable_http_servers_tool_is_called_with_the_headers_from_the_environment(
    http: httpx.AsyncClient, http_server: None
) -> None:
    streamed = await send(
        http, new_session(), '@tool calchttp__add {"a": 40, "b": 2}', agent="mcp-http"
    )

    assert tool_output(streamed)["output"] == {"result": 42}
    assert streamed.types()[-1] == "finish"


async def test_an_http_server_that_refuses_the_worker_leaves_its_tools_out_and_the_turn_goes_on(
    http: httpx.AsyncClient, http_server: None
) -> None:
    streamed = await send(
        http, new_session(), '@tool calchttp__add {"a": 1, "b": 1}', agent="mcp-http-no-key"
    )

    output = tool_output(streamed)
    assert output["type"] == "tool-output-error"
    assert "MCP server calchttp" in str(output["errorText"])
    assert streamed.types()[-1] == "finish"


@pytest.mark.parametrize(
    ("agent", "server"),
    [("mcp-calc", "calc"), ("mcp-legacy", "old")],
    ids=["listen-stream-2026-07-28", "notification-before-2026"],
)
async def test_a_stdio_server_that_died_between_turns_is_started_again_at_the_next_use(
    http: httpx.AsyncClient, record_file: Path, agent: str, server: str
) -> None:
    session = new_session()
    first = await send(http, session, f"@tool {server}__pid {{}}", agent=agent)
    pid = tool_output(first)["output"]
    assert isinstance(pid, dict) and isinstance(pid["result"], int)
    os.kill(pid["result"], signal.SIGKILL)
    await asyncio.sleep(0.5)  # between two turns: the next comes a moment later

    again = await send(http, session, f'@tool {server}__add {{"a": 1, "b": 1}}', agent=agent)

    assert tool_output(again)["output"] == {"result": 2}
    after = await send(http, session, f"@tool {server}__pid {{}}", agent=agent)
    assert tool_output(after)["output"] != pid  # a new process


async def test_a_tool_the_server_fails_is_a_tool_error_naming_the_server(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    streamed = await send(
        http, new_session(), '@tool calc__fail {"reason": "out of paper"}', agent="mcp-calc"
    )

    output = tool_output(streamed)
    assert output["type"] == "tool-output-error"
    assert "MCP server calc: tool fail failed" in str(output["errorText"])
    assert "Error executing tool fail" in str(output["errorText"])  # the server's own words
    assert streamed.types()[-1] == "finish"
