"""An answer to an MCP server's question, checked against the question before it is recorded:
one answer per question, content only to accept a form, and content that matches the form."""

from gateway.errors import ApiError
from gateway.schemas.waits import InputAnswerBody
from perdure.domain.input_requests import answer_problems
from storage.db import Database
from storage.input_waits import input_wait, questions_of
from storage.tool_waits import WaitAnswer


async def checked_input_answer(
    db: Database, *, tenant_id: str, session_id: str, wait_id: str, body: InputAnswerBody
) -> WaitAnswer:
    """The answer to record; a 404 for a request not in the session, a 422 saying what is
    wrong with an answer the server's questions do not allow."""
    row = await input_wait(db, tenant_id=tenant_id, session_id=session_id, wait_id=wait_id)
    if row is None:
        raise ApiError(404, "wait_not_found", f"no input request {wait_id!r} in this session")
    questions = {question.key: question for question in questions_of(row)}
    problems = [
        f"question {key}: not asked in this request"
        for key in body.responses.keys() - questions.keys()
    ]
    problems += [f"question {key}: no answer" for key in questions.keys() - body.responses.keys()]
    for key, answer in body.responses.items():
        question = questions.get(key)
        if question is not None:
            problems += [
                f"question {key}: {problem}" for problem in answer_problems(question, answer)
            ]
    if problems:
        raise ApiError(422, "invalid_input_answer", "; ".join(sorted(problems)))
    return WaitAnswer(
        kind="input",
        key=wait_id,
        output={
            key: answer.model_dump(exclude_none=True) for key, answer in body.responses.items()
        },
    )
