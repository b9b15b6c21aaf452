"""An MCP call that asks for input (the 2026-07-28 `input_required` result) in Perdure's
terms: the questions a person answers and the state the retry echoes, and the answers sent
back in the SDK's. docs/mcp.md#input-required."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perdure.domain.input_requests import InputAnswer, InputQuestion
from perdure.mcp_servers import McpServer, exposed_name

if TYPE_CHECKING:  # the SDK is imported at the worker's start (`import_mcp_sdk`)
    from mcp.types import InputRequiredResult, InputResponses

STATE_ONLY_ROUNDS = 8
"""A server that asks nothing but hands back state is called again at once, at most this
often in one call: the protocol allows it, and a server that never ends must not hold a turn."""


class InputNotAnswerable(Exception):
    """The server asked for something Perdure does not give (sampling, roots)."""


@dataclass(frozen=True)
class InputAsked:
    """The server's questions of one round, and the opaque state it wants echoed."""

    questions: list[InputQuestion]
    request_state: str | None
    tool_name: str
    """As the model calls it (`<server>__<tool>`)."""
    timeout_seconds: float
    """How long the turn waits for the answer (the server's `input_timeout`)."""


@dataclass(frozen=True)
class InputRound:
    """What the call sends again: the person's answers and the server's state, as stored."""

    answers: dict[str, InputAnswer]
    request_state: str | None


def asked_by(result: "InputRequiredResult", server: McpServer, tool: str) -> InputAsked:
    """The questions of `result`; `InputNotAnswerable` when one is not an elicitation."""
    from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitRequestURLParams

    questions: list[InputQuestion] = []
    for key, request in (result.input_requests or {}).items():
        if not isinstance(request, ElicitRequest):
            raise InputNotAnswerable(f"it asked for {request.method}, which Perdure does not give")
        params = request.params
        if isinstance(params, ElicitRequestURLParams):
            questions.append(
                InputQuestion(key=key, mode="url", message=params.message, url=params.url)
            )
        elif isinstance(params, ElicitRequestFormParams):
            questions.append(
                InputQuestion(
                    key=key,
                    mode="form",
                    message=params.message,
                    requested_schema=params.requested_schema,
                )
            )
    return InputAsked(
        questions=questions,
        request_state=result.request_state,
        tool_name=exposed_name(server.name, tool),
        timeout_seconds=server.input_timeout.total_seconds(),
    )


def responses_of(answers: dict[str, InputAnswer]) -> "InputResponses":
    from mcp.types import ElicitResult

    return {
        key: ElicitResult(action=answer.action, content=answer.content)
        for key, answer in answers.items()
    }
