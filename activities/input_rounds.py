"""An MCP call's rounds of questions in the tool activity: what a call sends again (the last
round's answers and the server's state, from the store, so any worker can send them), and a
new round recorded as the turn's wait with its question in the log."""

from dataclasses import dataclass

from activities.mcp_input import InputAsked, InputRound
from perdure.domain.input_requests import InputAnswer, input_request_chunk
from perdure.domain.payloads import RunToolInput
from storage.chunks import LogWriter
from storage.db import Database
from storage.input_waits import input_rounds, record_input_round, request_state_of
from storage.tables import ToolWaitRow
from storage.tool_waits import PENDING, new_input_wait_id


@dataclass(frozen=True)
class CallRounds:
    """Where the call stands with its server's questions."""

    waiting: bool
    """Its last round is unanswered: an earlier attempt recorded it, the turn parks on it."""
    answers: InputRound | None
    """The last round's answers, for the call to send; None before any round."""
    asked: int
    """Rounds asked so far."""


def _answers(row: ToolWaitRow) -> InputRound | None:
    if row.status != "answered" or not isinstance(row.output, dict):
        return None
    return InputRound(
        answers={key: InputAnswer.model_validate(value) for key, value in row.output.items()},
        request_state=request_state_of(row),
    )


async def call_rounds(db: Database, call: RunToolInput) -> CallRounds:
    rows = await input_rounds(
        db, submission_id=call.turn.submission_id, tool_call_id=call.tool_call_id
    )
    if not rows:
        return CallRounds(waiting=False, answers=None, asked=0)
    last = rows[-1]
    return CallRounds(waiting=last.status == PENDING, answers=_answers(last), asked=len(rows))


async def record_asked(
    db: Database,
    call: RunToolInput,
    *,
    asked: InputAsked,
    round: int,
    writer: LogWriter,
) -> None:
    """The round as a pending wait, and its questions as a data part of the answer."""
    wait_id = new_input_wait_id()
    await record_input_round(
        db,
        submission_id=call.turn.submission_id,
        message_id=call.turn.assistant_message_id,
        tool_call_id=call.tool_call_id,
        tool_name=asked.tool_name,
        round=round,
        questions=asked.questions,
        request_state=asked.request_state,
        timeout_seconds=asked.timeout_seconds,
        chunk=input_request_chunk(
            wait_id=wait_id,
            tool_call_id=call.tool_call_id,
            tool_name=asked.tool_name,
            questions=asked.questions,
        ),
        writer=writer,
    )
