"""The tasks extension's messages in the MCP SDK's terms (the SDK ships the extension points,
not the extension): the `task` result a call may return, `tasks/get` and `tasks/cancel`.
Shapes per modelcontextprotocol/ext-tasks, specification/draft/tasks.md. Imported with the
SDK, at a worker's start."""

import time
from typing import Any, Literal

from mcp.client.session import ClientSession
from mcp.types import (
    InputRequests,
    InputRequiredResult,
    InputResponses,
    Request,
    RequestParams,
    Result,
)
from pydantic import ConfigDict, TypeAdapter

from perdure.domain.mcp_tasks import TaskSeen

_QUESTIONS: TypeAdapter[InputRequests] = TypeAdapter(InputRequests)


class CreatedTask(Result):
    """`CreateTaskResult` (`resultType: "task"`): the task's seed state."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None

    def seen(self) -> TaskSeen:
        return TaskSeen(
            task_id=self.task_id,
            status=self.status,
            status_message=self.status_message,
            poll_interval_ms=self.poll_interval_ms,
            started_at=time.time(),
        )


class DetailedTask(Result):
    """`GetTaskResult`: the task, with its result (`completed`) or error (`failed`) inlined."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    """With `input_required`: the questions outstanding, keyed (each key used once)."""


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the spec's `Mcp-Name` routing header


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def update_task(session: ClientSession, task_id: str, responses: InputResponses) -> None:
    """`tasks/update`: the person's answers to the task's outstanding questions."""
    answers = {
        key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, response in responses.items()
    }
    params = UpdateParams(task_id=task_id, input_responses=answers)
    await session.send_request(UpdateTask(params=params), Result)


def asked(detailed: DetailedTask, answered: frozenset[str]) -> InputRequiredResult | None:
    """The questions a task in `input_required` asks that were not answered yet (the server
    may show answered ones until it has taken them in)."""
    outstanding = {
        key: request
        for key, request in (detailed.input_requests or {}).items()
        if key not in answered
    }
    if not outstanding:
        return None
    return InputRequiredResult(input_requests=_QUESTIONS.validate_python(outstanding))


async def cancel_task(session: ClientSession, task_id: str, read_seconds: float) -> None:
    await session.send_request(
        CancelTask(params=TaskParams(task_id=task_id)),
        Result,
        request_read_timeout_seconds=read_seconds,
    )
