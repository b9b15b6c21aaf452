"""An MCP server that asks a person mid-call (the 2026-07-28 `input_required` result,
docs/mcp.md#input-required): the turn parks on the question as on an approval, the answer
goes back to the server with its request state, and the call goes on, round after round.
The calc server's `sign_up` asks a name, then a confirmation."""

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import Streamed, send
from tests.e2e.test_approvals import idle, resume_after

SIGN_UP = '@tool calc__sign_up {"plan": "pro"}'


def new_session() -> str:
    return f"mcp-input-{uuid.uuid4().hex[:12]}"


def question_of(streamed: Streamed) -> dict[str, Any]:
    """The data of the last question the stream showed."""
    asked = [c for c in streamed.chunks if c["type"] == "data-input-request"]
    data: dict[str, Any] = asked[-1]["data"]
    return data


def outputs(streamed: Streamed) -> list[dict[str, Any]]:
    return [c for c in streamed.chunks if c["type"].startswith("tool-output")]


async def answer(
    http: httpx.AsyncClient, session: str, wait_id: str, **responses: dict[str, Any]
) -> httpx.Response:
    return await http.post(
        f"/v1/sessions/{session}/inputs/{wait_id}", json={"responses": responses}
    )


async def answered(
    http: httpx.AsyncClient, session: str, parked: Streamed, **responses: dict[str, Any]
) -> Streamed:
    """Answer the question `parked` ends on, and read the turn on from its park."""
    sent = await answer(http, session, question_of(parked)["waitId"], **responses)
    assert sent.status_code == 200, sent.text
    return await resume_after(http, session, parked)


async def test_a_call_the_server_asks_about_parks_the_turn_on_its_question(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()

    parked = await send(http, session, SIGN_UP, agent="mcp-input")

    assert parked.types()[-2:] == ["data-input-request", "finish"]
    assert parked.chunks[-1]["finishReason"] == "tool-calls"
    question = question_of(parked)
    assert question["status"] == "pending"
    assert question["questions"] == [
        {
            "key": "name",
            "mode": "form",
            "message": "What is your name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        }
    ]
    listed = (await http.get(f"/v1/sessions/{session}/inputs")).json()
    assert [(i["waitId"], i["round"], i["toolName"]) for i in listed] == [
        (question["waitId"], 1, "calc__sign_up")
    ]
    assert "requestState" not in str(listed)
    assert (await http.get(f"/v1/sessions/{session}")).json()["status"] == "waiting"


async def test_each_answer_goes_back_to_the_server_until_the_call_has_its_result(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session, name = new_session(), f"Ada-{uuid.uuid4().hex[:6]}"
    parked = await send(http, session, SIGN_UP, agent="mcp-input")

    asked_again = await answered(
        http, session, parked, name={"action": "accept", "content": {"name": name}}
    )
    assert question_of(asked_again)["questions"][0]["message"] == f"Sign {name} up for pro?"
    assert asked_again.chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    done = await answered(
        http, session, asked_again, confirm={"action": "accept", "content": {"confirm": True}}
    )

    assert [(c["type"], c.get("output")) for c in outputs(done)] == [
        ("tool-output-available", {"result": f"signed up {name} for pro"})
    ]
    assert done.chunks[-1]["finishReason"] == "stop"
    assert record_file.read_text().splitlines().count(f"signed up {name}") == 1


async def test_a_declined_question_is_the_servers_to_answer(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    parked = await send(http, session, SIGN_UP, agent="mcp-input")

    done = await answered(http, session, parked, name={"action": "decline"})

    assert [c.get("output") for c in outputs(done)] == [{"result": "not signed up: decline"}]
    assert question_of(done)["status"] == "answered"
    assert question_of(done)["actions"] == {"name": "decline"}


async def test_an_answer_the_requested_schema_refuses_is_a_422_saying_why_and_the_wait_stays(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    parked = await send(http, session, SIGN_UP, agent="mcp-input")
    wait_id = question_of(parked)["waitId"]

    wrong_type = await answer(
        http, session, wait_id, name={"action": "accept", "content": {"name": 7}}
    )
    missing = await answer(http, session, wait_id, name={"action": "accept", "content": {}})
    unasked = await answer(http, session, wait_id, age={"action": "decline"})

    assert wrong_type.status_code == 422
    assert "question name: `name` must be text" in wrong_type.text
    assert missing.status_code == 422
    assert "question name: `name` is required" in missing.text
    assert unasked.status_code == 422
    assert "question age: not asked in this request" in unasked.text
    assert "question name: no answer" in unasked.text
    listed = (await http.get(f"/v1/sessions/{session}/inputs")).json()
    assert [i["waitId"] for i in listed] == [wait_id]


async def test_an_unanswered_question_ends_the_call_as_a_tool_error_and_a_late_answer_is_409(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    parked = await send(http, session, SIGN_UP, agent="mcp-input-hasty")  # waits 2 s

    continued = await resume_after(http, session, parked)
    late = await answer(http, session, question_of(parked)["waitId"], name={"action": "cancel"})

    assert [(c["type"], c.get("errorText")) for c in outputs(continued)] == [
        (
            "tool-output-error",
            "Nobody answered the MCP server's question: no answer came in time.",
        )
    ]
    assert question_of(continued)["status"] == "expired"
    assert continued.chunks[-1]["finishReason"] == "stop"
    assert late.status_code == 409


async def test_a_stop_while_a_question_waits_ends_the_turn_and_settles_the_call(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    parked = await send(http, session, SIGN_UP, agent="mcp-input")

    stopped = await http.post(f"/api/chat/{session}/stop")
    ended = await resume_after(http, session, parked)
    late = await answer(http, session, question_of(parked)["waitId"], name={"action": "cancel"})

    assert stopped.status_code in (200, 202), stopped.text
    assert [c["type"] for c in outputs(ended)] == ["tool-output-error"]
    assert ended.chunks[-1]["type"] == "abort"
    assert late.status_code == 409
    await idle(http, session)


async def test_an_approved_call_that_the_server_asks_about_parks_again_for_the_question(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()
    parked = await send(http, session, SIGN_UP, agent="mcp-input-approve")
    approval = next(c for c in parked.chunks if c["type"] == "tool-approval-request")
    approved = await http.post(
        f"/v1/sessions/{session}/approvals/{approval['approvalId']}", json={"approved": True}
    )
    assert approved.status_code == 200, approved.text

    asked = await resume_after(http, session, parked)

    assert asked.types()[-2:] == ["data-input-request", "finish"]
    done = await answered(http, session, asked, name={"action": "cancel"})
    assert [c.get("output") for c in outputs(done)] == [{"result": "not signed up: cancel"}]


async def test_a_call_a_step_runs_in_a_tool_round_that_the_server_asks_about_parks_the_turn(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    session = new_session()

    parked = await send(http, session, SIGN_UP, agent="mcp-input-idempotent")

    assert parked.types()[-2:] == ["data-input-request", "finish"]
    assert parked.types().count("data-input-request") == 1  # the round's question is not shown
    done = await answered(http, session, parked, name={"action": "decline"})
    assert [c.get("output") for c in outputs(done)] == [{"result": "not signed up: decline"}]


async def test_a_server_started_again_with_a_key_of_its_own_refuses_the_old_state(
    http: httpx.AsyncClient, record_file: Path
) -> None:
    """Without CALC_STATE_KEY the server seals its state with a key only its process held:
    the answer reaches a new process, which refuses the state; the model is told."""
    session = new_session()
    pid = await send(http, session, "@tool calc__pid {}", agent="mcp-input")
    parked = await send(http, session, SIGN_UP, agent="mcp-input")
    os.kill(int(outputs(pid)[0]["output"]["result"]), signal.SIGKILL)

    done = await answered(
        http, session, parked, name={"action": "accept", "content": {"name": "Al"}}
    )

    [output] = outputs(done)
    assert output["type"] == "tool-output-error"
    assert "Invalid or expired requestState" in output["errorText"]
    assert "MCP server calc" in output["errorText"]


@pytest.fixture(autouse=True)
def no_shared_state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process worker's calc server keeps its state key to itself (see the last spec)."""
    monkeypatch.delenv("PERDURE_TEST_MCP_STATE_KEY", raising=False)
