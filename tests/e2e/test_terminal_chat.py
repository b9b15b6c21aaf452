"""`perdure chat`, `perdure sessions` and `perdure open`: the terminal client of the gateway,
run as a person runs it (a pseudo-terminal) or as a script does (no terminal)."""

import asyncio
import contextlib
import dataclasses
import json
import stat
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import create_app
from perdure.runtime.settings import ApiKeys
from perdure.testing.agents.approvals import tool_runs
from perdure.testing.chat_client import counting, send
from perdure.testing.fakeprovider.anthropic import THINKING
from perdure.testing.stack import Stack, free_port, serving
from tests.e2e.terminal import UP, Terminal, run_perdure

# The client speaks only HTTP to the gateway: which store is behind it changes nothing.
pytestmark = pytest.mark.store_agnostic

DELETE = '@tool delete_file {"path": "notes/%s.txt"}'
DIM_ITALIC = "\x1b[2;3m"


def new_chat() -> str:
    return f"term-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def terminal(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Terminal]:
    shell = Terminal(*args, env=env)
    try:
        yield shell
    finally:
        shell.close()


@contextlib.asynccontextmanager
async def chatting(
    stack: Stack, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[Terminal]:
    """`perdure chat` against the stack, at its first prompt."""
    async with terminal("chat", "--url", stack.url, *args, env=env) as shell:
        await shell.prompt()
        yield shell


async def submissions(http: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/sessions/{chat_id}/submissions")
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["data"]
    return listed


@pytest.fixture
async def keyed_gateway(stack: Stack) -> AsyncIterator[str]:
    """A second gateway on the same stack that wants `Authorization: Bearer key-a`."""
    settings = stack.settings.model_copy(update={"api_keys": ApiKeys.parse("key-a:alpha")})
    app = create_app(services=dataclasses.replace(stack.services, settings=settings))
    async with serving(app) as url:
        yield url


async def test_a_message_streams_its_answer_in_a_new_chat(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    async with terminal("chat", "--url", stack.url) as shell:
        greeting = await shell.prompt()
        await shell.type("@count 5 @delay 20")
        answer = await shell.prompt()
        status = await shell.leave_with_ctrl_d()

    chat_id = greeting.split("new chat ", 1)[1].split()[0]
    assert counting(5) in answer
    assert status == 0
    assert [s["status"] for s in await submissions(http, chat_id)] == ["completed"]


async def test_an_approved_tool_runs_and_the_answer_goes_on(stack: Stack) -> None:
    path = uuid.uuid4().hex[:8]
    async with chatting(stack, "--agent", "approvals") as shell:
        await shell.type(DELETE % path)
        question = await shell.expect("allow it? [y/n]")
        await shell.type("y")
        answer = await shell.prompt()

    assert f'delete_file {{"path": "notes/{path}.txt"}} needs your approval' in question
    assert f"↳ deleted notes/{path}.txt" in answer
    assert tool_runs.count(f"delete_file:notes/{path}.txt") == 1


async def test_a_denied_tool_does_not_run_and_the_reason_is_shown(stack: Stack) -> None:
    path = uuid.uuid4().hex[:8]
    async with chatting(stack, "--agent", "approvals") as shell:
        await shell.type(DELETE % path)
        await shell.expect("allow it? [y/n]")
        await shell.type("n")
        await shell.expect("reason (optional):")
        await shell.type("not that file")
        answer = await shell.prompt()

    assert "✗ denied: not that file" in answer
    assert f"delete_file:notes/{path}.txt" not in tool_runs


async def test_an_mcp_servers_questions_are_asked_at_the_terminal_round_after_round(
    stack: Stack, record_file: Path
) -> None:
    name = f"Ada{uuid.uuid4().hex[:6]}"
    async with chatting(stack, "--agent", "mcp-input") as shell:
        await shell.type('@tool calc__sign_up {"plan": "pro"}')
        await shell.expect("What is your name?")
        await shell.expect("[a]ccept, [d]ecline or [c]ancel?")
        await shell.type("a")
        await shell.expect("name (string):")
        await shell.type(name)
        await shell.expect(f"Sign {name} up for pro?")
        await shell.expect("[a]ccept, [d]ecline or [c]ancel?")
        await shell.type("a")
        await shell.expect("confirm (y/n):")
        await shell.type("y")
        answer = await shell.prompt()

    assert f"signed up {name} for pro" in answer
    assert record_file.read_text().splitlines().count(f"signed up {name}") == 1


async def test_reasoning_is_shown_dimmed_before_the_answer(stack: Stack) -> None:
    async with chatting(stack, "--agent", "thinking") as shell:
        await shell.type("@count 3")
        answer = await shell.prompt()

    assert THINKING in answer
    assert answer.index(THINKING) < answer.index(counting(3))
    assert DIM_ITALIC + THINKING.split()[0] in shell.drawn


async def test_a_client_tool_call_is_answered_with_an_error_and_the_turn_goes_on(
    stack: Stack,
) -> None:
    async with chatting(stack, "--agent", "approvals") as shell:
        await shell.type('@tool pick_color {"prompt": "which?"}')
        answer = await shell.prompt()

    assert '⚙ pick_color {"prompt": "which?"}' in answer
    assert "✗ This terminal client cannot run client-side tools." in answer


async def test_ctrl_c_stops_the_answer_and_the_next_message_is_answered(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    async with chatting(stack, "--session", chat_id) as shell:
        await shell.type("@count 400 @delay 25")
        await shell.expect("1 2 3")
        await shell.interrupt()
        stopped = await shell.prompt()
        await shell.type("@count 3")
        answer = await shell.prompt()

    assert "■ stopped" in stopped
    assert counting(3) in answer
    assert [s["status"] for s in await submissions(http, chat_id)] == ["aborted", "completed"]


async def test_up_at_the_prompt_recalls_the_last_message_to_send_again(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    async with chatting(stack, "--session", chat_id) as shell:
        await shell.type("@count 3")
        await shell.prompt()
        await shell.keys(UP)
        await shell.type("")
        again = await shell.prompt()

    assert "@count 3" in again and counting(3) in again
    messages = (await http.get(f"/api/chat/{chat_id}/messages")).json()
    sent = [m["parts"] for m in messages if m["role"] == "user"]
    assert sent == [[{"type": "text", "text": "@count 3"}]] * 2


async def test_an_answer_to_an_approval_question_is_not_recalled_by_up(stack: Stack) -> None:
    path = uuid.uuid4().hex[:8]
    async with chatting(stack, "--agent", "approvals") as shell:
        await shell.type(DELETE % path)
        await shell.expect("allow it? [y/n]")
        await shell.type("y")
        await shell.prompt()
        await shell.keys(UP)
        await shell.type("")
        await shell.expect("allow it? [y/n]")  # the message was sent again, not "y"
        await shell.type("n")
        await shell.expect("reason (optional):")
        await shell.type("")
        await shell.prompt()

    assert tool_runs.count(f"delete_file:notes/{path}.txt") == 1


async def test_up_recalls_a_message_sent_in_an_earlier_run(stack: Stack, tmp_path: Path) -> None:
    history = {"PERDURE_CHAT_HISTORY": str(tmp_path / "state" / "chat_history")}
    async with chatting(stack, env=history) as shell:
        await shell.type("@count 3")
        await shell.prompt()
        assert await shell.leave_with_ctrl_d() == 0

    async with chatting(stack, env=history) as shell:
        await shell.keys(UP)
        await shell.type("")
        again = await shell.prompt()

    assert "@count 3" in again and counting(3) in again


async def test_the_kept_history_holds_only_messages_and_only_its_owner_reads_it(
    stack: Stack, tmp_path: Path
) -> None:
    kept = tmp_path / "state" / "chat_history"
    path = uuid.uuid4().hex[:8]
    async with chatting(
        stack, "--agent", "approvals", env={"PERDURE_CHAT_HISTORY": str(kept)}
    ) as shell:
        await shell.type(DELETE % path)
        await shell.expect("allow it? [y/n]")
        await shell.type("n")
        await shell.expect("reason (optional):")
        await shell.type("not now")
        await shell.prompt()

    assert kept.read_text().splitlines() == [DELETE % path]
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700


async def test_an_empty_history_setting_keeps_nothing(stack: Stack, tmp_path: Path) -> None:
    unset = {"PERDURE_CHAT_HISTORY": "", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    async with chatting(stack, env=unset) as shell:
        await shell.type("@count 2")
        await shell.prompt()

    assert list(tmp_path.rglob("*")) == []


async def test_a_second_ctrl_c_during_an_answer_leaves(stack: Stack) -> None:
    async with chatting(stack) as shell:
        await shell.type("@count 400 @delay 25")
        await shell.expect("1 2 3")
        await shell.interrupt()
        await shell.expect("■ stopping…")
        await shell.interrupt()
        assert await shell.exit_status() == 0


async def test_ctrl_c_at_the_prompt_leaves(stack: Stack) -> None:
    async with chatting(stack) as shell:
        assert await shell.leave_with_ctrl_c() == 0


async def test_the_recovery_notice_is_shown_while_a_turn_recovers(stack: Stack) -> None:
    tag = uuid.uuid4().hex[:8]
    async with chatting(stack) as shell:
        await shell.type(f"{tag} @count 8 @delay 300 @disconnect_after 3")
        answer = await shell.prompt()

    assert "↻ the answer was interrupted and is recovering (attempt 1 of" in answer
    assert counting(8) in answer


async def test_a_session_goes_on_from_its_last_messages(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "first @count 2")
    async with terminal("chat", "--url", stack.url, "--session", chat_id) as shell:
        history = await shell.expect("at the prompt leaves.")
        await shell.prompt()
        await shell.type("second @count 3")
        answer = await shell.prompt()

    assert "› first @count 2" in history
    assert counting(2) in history
    assert counting(3) in answer
    assert len(await submissions(http, chat_id)) == 2


async def test_a_session_waiting_for_an_approval_asks_for_it(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id, path = new_chat(), uuid.uuid4().hex[:8]
    parked = await send(http, chat_id, DELETE % path, agent="approvals")
    assert parked.chunks[-1]["finishReason"] == "tool-calls"
    async with terminal("chat", "--url", stack.url, "--session", chat_id) as shell:
        await shell.expect("allow it? [y/n]")
        await shell.type("y")
        answer = await shell.prompt()

    assert f"↳ deleted notes/{path}.txt" in answer
    assert [s["status"] for s in await submissions(http, chat_id)] == ["completed"]


async def test_another_agent_for_an_existing_chat_is_refused(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "@count 1")
    status, out, err = await run_perdure(
        "chat", "--url", stack.url, "--session", chat_id, "--agent", "approvals", "-m", "hi"
    )

    assert status == 1
    assert "--agent picks the agent of a new chat only" in err


async def test_one_shot_into_a_chat_waiting_for_an_approval_exits_1(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, DELETE % uuid.uuid4().hex[:8], agent="approvals")
    status, out, err = await run_perdure(
        "chat", "--url", stack.url, "--session", chat_id, "-m", "@count 2"
    )

    assert (status, out) == (1, "")
    assert f"waits for an approval: answer it first, with `perdure chat --session {chat_id}`" in err
    assert len(await submissions(http, chat_id)) == 1


async def test_one_shot_of_a_turn_that_waits_for_an_approval_exits_1_naming_it(
    stack: Stack,
) -> None:
    chat_id = new_chat()
    status, out, err = await run_perdure(
        "chat",
        "--url",
        stack.url,
        "--session",
        chat_id,
        "--agent",
        "approvals",
        "-m",
        DELETE % uuid.uuid4().hex[:8],
    )

    assert status == 1
    assert "perdure chat: the turn waits for approval of delete_file (appr_" in err
    assert f"answer with `perdure chat --session {chat_id}`" in err


async def test_one_shot_prints_the_answer_as_text_and_exits_0(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    status, out, err = await run_perdure(
        "chat", "--url", stack.url, "--session", chat_id, "-m", "@count 6"
    )

    assert (status, out) == (0, counting(6) + "\n"), err
    assert f"new chat {chat_id}" in err


async def test_one_shot_exits_1_with_the_error_when_the_turn_fails(stack: Stack) -> None:
    status, out, err = await run_perdure(
        "chat", "--url", stack.url, "--agent", "nobody", "-m", "@count 2"
    )

    assert status == 1
    assert "perdure chat: the turn ended in an error: unknown agent 'nobody'" in err
    assert "{" not in err.split("\n")[-2]  # one readable line, no JSON


async def test_one_shot_with_a_wrong_api_key_exits_1_with_a_readable_error(
    keyed_gateway: str,
) -> None:
    status, out, err = await run_perdure(
        "chat", "--url", keyed_gateway, "--api-key", "wrong", "-m", "@count 2"
    )

    assert (status, out) == (1, "")
    assert err.strip().splitlines()[-1] == (
        "perdure chat: a valid 'Authorization: Bearer <key>' is required"
    )


async def test_one_shot_with_the_right_api_key_is_answered(keyed_gateway: str) -> None:
    status, out, err = await run_perdure(
        "chat", "--url", keyed_gateway, "--api-key", "key-a", "-m", "@count 2"
    )

    assert (status, out) == (0, counting(2) + "\n"), err


async def test_one_shot_cannot_reach_a_gateway_that_is_not_there() -> None:
    status, out, err = await run_perdure(
        "chat", "--url", f"http://127.0.0.1:{free_port()}", "-m", "hi"
    )

    assert status == 1
    assert "perdure chat: cannot reach the gateway at http://127.0.0.1:" in err


class CuttingProxy:
    """Forwards to the gateway, and cuts the first connection after `cut_after` bytes of
    its response: a connection dropped mid-answer."""

    def __init__(self, target_port: int, cut_after: int) -> None:
        self.target_port = target_port
        self.cut_after = cut_after
        self.connections = 0
        self.port = free_port()

    async def __aenter__(self) -> "CuttingProxy":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        limit = self.cut_after if self.connections == 1 else None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pump(
            source: asyncio.StreamReader, sink: asyncio.StreamWriter, limit: int | None
        ) -> None:
            sent = 0
            while data := await source.read(limit - sent if limit else 65536):
                sink.write(data)
                await sink.drain()
                sent += len(data)
                if limit is not None and sent >= limit:
                    break
            for end in (writer, up_writer):
                end.transport.abort()

        await asyncio.gather(
            pump(reader, up_writer, None), pump(up_reader, writer, limit), return_exceptions=True
        )


async def test_a_dropped_connection_resumes_and_shows_nothing_twice(stack: Stack) -> None:
    port = int(stack.url.rsplit(":", 1)[1])
    async with CuttingProxy(port, cut_after=1200) as proxy:
        status, out, err = await run_perdure(
            "chat", "--url", f"http://127.0.0.1:{proxy.port}", "-m", "@count 60 @delay 10"
        )

    assert (status, out) == (0, counting(60) + "\n"), err
    assert proxy.connections >= 2


async def test_sessions_list_shows_the_chats(stack: Stack, http: httpx.AsyncClient) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "listed @count 1")
    status, out, err = await run_perdure("sessions", "list", "--url", stack.url, "--limit", "200")

    assert status == 0, err
    row = next(line for line in out.splitlines() if chat_id in line)
    assert "listed @count 1" in row and "default" in row and "idle" in row


async def test_sessions_list_without_a_terminal_prints_a_line_per_chat(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "a title long enough to wrap an eighty-column table @count 1")
    status, out, err = await run_perdure("sessions", "list", "--url", stack.url, "--limit", "200")

    assert status == 0, err
    (row,) = [line.split("\t") for line in out.splitlines() if line.startswith(f"{chat_id}\t")]
    assert row[:4] == [
        chat_id,
        "a title long enough to wrap an eighty-column table @count 1",
        "default",
        "idle",
    ]
    assert datetime.fromisoformat(row[4]).tzinfo is not None


async def test_sessions_list_json_is_the_apis_list(stack: Stack, http: httpx.AsyncClient) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "as json @count 1")
    status, out, err = await run_perdure(
        "sessions", "list", "--json", "--url", stack.url, "--limit", "200"
    )

    assert status == 0, err
    (listed,) = [session for session in json.loads(out) if session["id"] == chat_id]
    assert (listed["title"], listed["agent"], listed["status"]) == (
        "as json @count 1",
        "default",
        "idle",
    )


async def test_sessions_show_prints_the_transcript(stack: Stack, http: httpx.AsyncClient) -> None:
    chat_id, path = new_chat(), uuid.uuid4().hex[:8]
    parked = await send(http, chat_id, DELETE % path, agent="approvals")
    approval = next(c for c in parked.chunks if c["type"] == "tool-approval-request")
    await http.post(
        f"/v1/sessions/{chat_id}/approvals/{approval['approvalId']}",
        json={"approved": False, "reason": "kept"},
    )
    await send(http, chat_id, "@count 3")
    status, out, err = await run_perdure("sessions", "show", chat_id, "--url", stack.url)

    assert status == 0, err
    assert f"chat {chat_id} · agent approvals · idle" in out
    assert f'⚙ delete_file {{"path": "notes/{path}.txt"}}' in out
    assert "✗ denied: kept" in out
    assert "› @count 3" in out and counting(3) in out


async def test_sessions_delete_deletes_the_chat(stack: Stack, http: httpx.AsyncClient) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "@count 1")
    status, out, err = await run_perdure("sessions", "delete", chat_id, "--url", stack.url)

    assert (status, out.strip()) == (0, f"deleted chat {chat_id}"), err
    assert (await http.get(f"/v1/sessions/{chat_id}")).status_code == 404


@pytest.mark.parametrize(("answer", "kept"), [("n", True), ("", True), ("y", False)])
async def test_sessions_delete_at_a_terminal_asks_first(
    stack: Stack, http: httpx.AsyncClient, answer: str, kept: bool
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "@count 1")
    async with terminal("sessions", "delete", chat_id, "--url", stack.url) as shell:
        await shell.expect(f"delete chat {chat_id} and all of its turns? [y/N]")
        await shell.type(answer)
        said = await shell.expect(f" chat {chat_id}")
        status = await shell.exit_status()

    assert status == 0
    assert said.strip().endswith("kept" if kept else "deleted")
    found = (await http.get(f"/v1/sessions/{chat_id}")).status_code
    assert found == (200 if kept else 404)


async def test_sessions_delete_with_yes_does_not_ask(stack: Stack, http: httpx.AsyncClient) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "@count 1")
    async with terminal("sessions", "delete", chat_id, "--yes", "--url", stack.url) as shell:
        await shell.expect(f"deleted chat {chat_id}")
        status = await shell.exit_status()

    assert status == 0
    assert "[y/N]" not in shell.shown
    assert (await http.get(f"/v1/sessions/{chat_id}")).status_code == 404


async def test_sessions_show_of_an_unknown_chat_exits_1(stack: Stack) -> None:
    status, out, err = await run_perdure("sessions", "show", new_chat(), "--url", stack.url)

    assert status == 1
    assert err.startswith("perdure sessions: session 'term-") and "not found" in err


async def test_open_prints_the_temporal_link_of_the_latest_turn(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    await send(http, chat_id, "@count 1")
    await send(http, chat_id, "@count 2")
    status, out, err = await run_perdure("open", chat_id, "--url", stack.url)

    latest = (await submissions(http, chat_id))[-1]
    assert (status, out) == (0, latest["temporalUrl"] + "\n"), err


async def test_open_with_a_submission_prints_that_turns_link(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    chat_id = new_chat()
    first = await send(http, chat_id, "@count 1")
    await send(http, chat_id, "@count 2")
    submission_id = first.headers["x-perdure-submission-id"]
    status, out, err = await run_perdure(
        "open", chat_id, "--submission", submission_id, "--url", stack.url
    )

    earliest = (await submissions(http, chat_id))[0]
    assert earliest["submissionId"] == submission_id
    assert (status, out) == (0, earliest["temporalUrl"] + "\n"), err
