"""The tasks extension's messages in the MCP SDK's terms (the SDK ships the extension points,
not the extension): the `task` result a call may return, `tasks/get` and `tasks/cancel`.
Shapes per modelcontextprotocol/ext-tasks, specification/draft/tasks.md. Imported with the
SDK, at a worker's start."""

import time
from typing import Any, Literal

from mcp.client.session import ClientSession
from mcp.types import Request, RequestParams, Result
from pydantic import ConfigDict

from perdure.domain.mcp_tasks import TaskSeen


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


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the spec's `Mcp-Name` routing header


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def cancel_task(session: ClientSession, task_id: str, read_seconds: float) -> None:
    await session.send_request(
        CancelTask(params=TaskParams(task_id=task_id)),
        Result,
        request_read_timeout_seconds=read_seconds,
    )
