"""The terminal client without a gateway: what it may import, reading the stream, folding it
into what is shown, and saying a gateway error in one line."""

import ast
import io
import json
from pathlib import Path

import httpx
from rich.console import Console
from rich.text import Text

from perdure.commands.answer_view import Answer, LineBlock, Tail, TextBlock, message_blocks
from perdure.commands.gateway_client import error_of
from perdure.commands.sse_events import EventReader, StreamEvent

CLIENT = {
    "answer_view",
    "chat_client",
    "chat_turn",
    "client_cli",
    "gateway_client",
    "input_prompts",
    "line_editing",
    "sessions_client",
    "sse_events",
}
"""The modules of `perdure chat`, `sessions` and `open`."""
COMMANDS = Path(__file__).resolve().parents[2] / "perdure" / "commands"
PERDURE = {"perdure", "workflows", "storage", "activities", "gateway"}
"""Perdure's packages: the client knows the gateway only by its HTTP API."""


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_client_speaks_only_http_it_imports_nothing_of_perdure_but_itself() -> None:
    outside = [
        f"{name} imports {module}"
        for name in sorted(CLIENT)
        for module in sorted(imports_of(COMMANDS / f"{name}.py"))
        if module.split(".")[0] in PERDURE
        and module.removeprefix("perdure.commands.") not in CLIENT
    ]

    assert outside == []


def lines(body: str) -> httpx.Response:
    """A response whose body is these lines, as the gateway streams them."""
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def test_events_carry_their_id_and_chunk_and_done_ends_the_stream() -> None:
    reader = EventReader()
    body = ': waiting for the turn\n\nid: s1:0\ndata: {"type":"start"}\n\ndata: [DONE]\n\n'

    events = list(reader.events(lines(body)))

    assert events == [StreamEvent(event_id="s1:0", chunk={"type": "start"})]
    assert reader.done


def test_an_event_cut_off_by_a_dropped_connection_is_not_read() -> None:
    reader = EventReader()
    body = 'id: s1:0\ndata: {"type":"start"}\n\nid: s1:1\ndata: {"type":"text-st'

    events = list(reader.events(lines(body)))

    assert [event.event_id for event in events] == ["s1:0"]
    assert not reader.done


def test_the_data_lines_of_one_event_are_one_chunk() -> None:
    body = 'id: s1:3\ndata: {"type":\ndata: "finish"}\n\n'

    assert [e.chunk for e in EventReader().events(lines(body))] == [{"type": "finish"}]


def shown(answer: Answer) -> list[str]:
    return [block.text for block in answer.blocks if isinstance(block, (TextBlock, LineBlock))] + (
        [answer.notice.text] if answer.notice else []
    )


def fold(*chunks: dict[str, object]) -> Answer:
    answer = Answer()
    for chunk in chunks:
        answer.apply(chunk)
    return answer


RECOVERY = {"type": "data-recovery", "transient": True, "data": {"attempt": 1, "maxAttempts": 3}}


def test_the_recovery_notice_stays_until_the_answer_goes_on() -> None:
    recovering = fold(
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "1 2"},
        RECOVERY,
        {"type": "start-step"},
    )
    recovered = fold(
        {"type": "text-start", "id": "t"},
        RECOVERY,
        {"type": "text-delta", "id": "t", "delta": " 3"},
    )

    assert shown(recovering)[-1].startswith("↻ the answer was interrupted and is recovering")
    assert shown(recovering)[-1].endswith("(attempt 1 of 3)…")
    assert shown(recovered) == [" 3"]


def test_a_tool_call_and_its_final_result_are_one_line_each() -> None:
    answer = fold(
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "research"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "research", "input": {}},
        {
            "type": "tool-output-available",
            "toolCallId": "c1",
            "output": "half",
            "preliminary": True,
        },
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"done": True}},
    )

    assert shown(answer) == ["⚙ research", '  ↳ {"done": true}']


def test_a_live_frame_taller_than_the_screen_shows_its_last_lines() -> None:
    console = Console(width=20, height=5, file=io.StringIO())
    whole = Text("\n".join(f"line {n}" for n in range(1, 11)))

    lines = console.render_lines(Tail(whole), pad=False)

    assert ["".join(s.text for s in line) for line in lines] == [
        "line 7",
        "line 8",
        "line 9",
        "line 10",
    ]


def test_a_gateway_error_is_one_line_with_its_problems() -> None:
    body = {
        "error": {
            "code": "invalid_request",
            "message": "the request is invalid",
            "requestId": "r1",
            "problems": [{"field": "id", "message": "too long"}],
        }
    }
    error = error_of(httpx.Response(422, content=json.dumps(body)))

    assert str(error) == "the request is invalid: id: too long"
    assert (error.code, error.status) == ("invalid_request", 422)


def test_an_error_that_is_not_the_gateways_says_its_status_and_first_line() -> None:
    error = error_of(httpx.Response(502, text="Bad Gateway\n<html>…</html>"))

    assert str(error) == "HTTP 502: Bad Gateway"


USAGE = {
    "inputTokens": 1200,
    "cachedInputTokens": 1024,
    "outputTokens": 80,
    "reasoningTokens": 30,
    "totalTokens": 1280,
}


def test_a_finished_answer_ends_with_what_it_used() -> None:
    answer = fold(
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "done"},
        {"type": "finish", "finishReason": "stop", "messageMetadata": {"usage": USAGE}},
    )

    assert shown(answer)[-1] == "· 1,280 tokens: 1,200 in (1,024 cached), 80 out (30 reasoning)"


def test_an_answer_that_used_its_budget_says_so_beside_its_usage() -> None:
    metadata = {"usage": {**USAGE, "cachedInputTokens": 0}, "finishReason": "budget"}
    answer = fold({"type": "finish", "finishReason": "other", "messageMetadata": metadata})

    assert shown(answer) == [
        "· 1,280 tokens: 1,200 in, 80 out (30 reasoning) · the turn used its budget"
    ]


def test_a_stopped_answer_shows_what_it_used_before_it_stopped() -> None:
    answer = fold(
        {"type": "message-metadata", "messageMetadata": {"usage": USAGE}},
        {"type": "abort", "reason": "user-cancelled"},
    )

    assert shown(answer) == [
        "· 1,280 tokens: 1,200 in (1,024 cached), 80 out (30 reasoning)",
        "■ stopped",
    ]


def test_a_stored_answer_shows_its_usage_under_it() -> None:
    message = {"role": "assistant", "parts": [{"type": "text", "text": "hi"}]}
    blocks = message_blocks({**message, "metadata": {"usage": USAGE}})

    assert blocks[-1] == LineBlock(
        "· 1,280 tokens: 1,200 in (1,024 cached), 80 out (30 reasoning)", style="dim"
    )


def test_a_workspace_change_shows_what_it_changed_under_its_call() -> None:
    diff = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n"
    answer = fold(
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "edit_file", "input": {}},
        {
            "type": "tool-output-available",
            "toolCallId": "c",
            "output": {"path": "notes.txt", "version": 2, "diff": diff},
        },
    )

    assert shown(answer)[1].splitlines() == [
        "  ↳ notes.txt v2",
        "    @@ -1,2 +1,2 @@",
        "     alpha",
        "    -beta",
        "    +gamma",
    ]


def task_chunk(status: str, message: str) -> dict[str, object]:
    data = {"server": "jobs", "status": status, "statusMessage": message, "toolCallId": "c1"}
    return {"type": "data-mcp-task", "id": "mcp-task-c1", "data": data}


def test_an_mcp_task_is_one_line_rewritten_as_it_moves() -> None:
    answer = Answer()

    answer.apply(task_chunk("working", "step 1 of 3"))
    answer.apply(task_chunk("completed", "done"))

    assert [block.text for block in answer.blocks if isinstance(block, LineBlock)] == [
        "  ⧗ jobs task completed: done"
    ]


def test_a_steering_message_shows_where_it_joined_the_answer() -> None:
    message = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "use metres"}]}
    answer = Answer()

    answer.apply({"type": "data-steer", "id": "u2", "data": {"message": message}})

    assert [block.text for block in answer.blocks if isinstance(block, LineBlock)] == [
        "› use metres"
    ]
