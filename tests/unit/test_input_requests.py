"""What an MCP server asks a person mid-call, and which answers may go back to it
(docs/mcp.md#input-required)."""

from datetime import timedelta

import pytest
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListRootsRequest,
)

from activities.mcp_input import InputNotAnswerable, asked_by, responses_of
from perdure.domain.input_requests import (
    FieldValue,
    InputAnswer,
    InputQuestion,
    answer_problems,
    content_problems,
    input_request_chunk,
)
from perdure.mcp_servers import McpServer

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 5},
        "age": {"type": "integer", "minimum": 0},
        "plan": {"type": "string", "enum": ["free", "pro"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "ok": {"type": "boolean"},
    },
    "required": ["name"],
}
SERVER = McpServer(name="calc", command=["calc"], input_timeout=timedelta(minutes=3))


def test_content_that_matches_the_form_has_no_problems() -> None:
    content: dict[str, FieldValue] = {
        "name": "Ada",
        "age": 36,
        "plan": "pro",
        "tags": ["a"],
        "ok": True,
    }

    assert content_problems(FORM, content) == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({}, "`name` is required"),
        ({"name": None}, "`name` is required"),
        ({"name": 7}, "`name` must be text"),
        ({"name": "Adalbert"}, "`name` must be at most 5 characters"),
        ({"name": "Ada", "age": 3.5}, "`age` must be a whole number"),
        ({"name": "Ada", "age": -1}, "`age` must be at least 0"),
        ({"name": "Ada", "age": True}, "`age` must be a number"),
        ({"name": "Ada", "plan": "gold"}, "`plan` must be one of free, pro"),
        ({"name": "Ada", "tags": ["c"]}, "`tags` items must be among a, b"),
        ({"name": "Ada", "ok": "yes"}, "`ok` must be true or false"),
        ({"name": "Ada", "extra": "x"}, "`extra` is not a field of the form"),
    ],
)
def test_content_that_breaks_the_form_is_refused_saying_where(
    content: dict[str, FieldValue], problem: str
) -> None:
    assert content_problems(FORM, content) == [problem]


def test_content_goes_only_with_accepting_a_form() -> None:
    form = InputQuestion(key="q", message="Name?", requested_schema=FORM)
    link = InputQuestion(key="q", mode="url", message="Sign in", url="https://example.com")

    assert answer_problems(form, InputAnswer(action="decline", content={"name": "A"})) == [
        "content is sent only to accept a form"
    ]
    assert answer_problems(link, InputAnswer(action="accept")) == []
    assert answer_problems(form, InputAnswer(action="cancel")) == []


def test_a_question_reaches_clients_as_a_data_part_keyed_by_its_wait() -> None:
    question = InputQuestion(key="name", message="Name?", requested_schema=FORM)

    chunk = input_request_chunk(
        wait_id="input_1", tool_call_id="call_1", tool_name="calc__sign_up", questions=[question]
    )

    assert chunk == {
        "type": "data-input-request",
        "id": "input_1",
        "data": {
            "waitId": "input_1",
            "toolCallId": "call_1",
            "toolName": "calc__sign_up",
            "questions": [
                {"key": "name", "mode": "form", "message": "Name?", "requestedSchema": FORM}
            ],
            "status": "pending",
        },
    }


def test_the_servers_elicitations_become_questions_with_its_state_and_timeout() -> None:
    result = InputRequiredResult(
        input_requests={
            "name": ElicitRequest(
                params=ElicitRequestFormParams(message="Name?", requested_schema=FORM)
            ),
            "login": ElicitRequest(
                params=ElicitRequestURLParams(message="Sign in", url="https://example.com")
            ),
        },
        request_state="sealed",
    )

    asked = asked_by(result, SERVER, "sign_up")

    assert asked.questions == [
        InputQuestion(key="name", message="Name?", requested_schema=FORM),
        InputQuestion(key="login", mode="url", message="Sign in", url="https://example.com"),
    ]
    assert (asked.request_state, asked.tool_name, asked.timeout_seconds) == (
        "sealed",
        "calc__sign_up",
        180.0,
    )


def test_a_request_that_is_no_elicitation_cannot_be_answered() -> None:
    result = InputRequiredResult(input_requests={"roots": ListRootsRequest()})

    with pytest.raises(InputNotAnswerable, match="roots/list"):
        asked_by(result, SERVER, "sign_up")


def test_answers_go_back_as_elicitation_results_under_the_servers_keys() -> None:
    responses = responses_of({"name": InputAnswer(action="accept", content={"name": "Ada"})})

    assert {key: r.model_dump(exclude_none=True) for key, r in responses.items()} == {
        "name": {"action": "accept", "content": {"name": "Ada"}}
    }
