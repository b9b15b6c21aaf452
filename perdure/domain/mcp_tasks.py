"""An MCP call's task as the answer's log records it: a `data-mcp-task` part per call,
replaced as the task moves on (the client sees its status and message; a worker that follows
the call after a crash reads its task id back). activities/mcp_tasks.py follows it."""

from dataclasses import dataclass, replace
from typing import Any

from perdure.domain.ui import Chunk

TASK_PART = "data-mcp-task"
TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class TaskSeen:
    task_id: str
    status: str
    status_message: str | None
    poll_interval_ms: int | None
    started_at: float
    """When the call's task was first seen (epoch seconds): its `task_timeout` counts from it."""

    @property
    def shown(self) -> tuple[str, str | None]:
        """What a client sees of it: a poll that changes neither records nothing."""
        return self.status, self.status_message

    def moved_to(self, status: str, status_message: str | None) -> "TaskSeen":
        return replace(self, status=status, status_message=status_message)

    def with_interval(self, poll_interval_ms: int | None) -> "TaskSeen":
        return replace(self, poll_interval_ms=poll_interval_ms or self.poll_interval_ms)


def part_id(tool_call_id: str) -> str:
    return f"mcp-task-{tool_call_id}"


def task_chunk(tool_call_id: str, server: str, seen: TaskSeen) -> Chunk:
    return {
        "type": TASK_PART,
        "id": part_id(tool_call_id),
        "data": {
            "toolCallId": tool_call_id,
            "server": server,
            "taskId": seen.task_id,
            "status": seen.status,
            "statusMessage": seen.status_message,
            "pollIntervalMs": seen.poll_interval_ms,
            "startedAt": seen.started_at,
        },
    }


def known_task(parts: list[dict[str, Any]], tool_call_id: str) -> TaskSeen | None:
    """The task the log records for the call, as last seen."""
    for part in parts:
        data = part.get("data")
        if part.get("type") == TASK_PART and part.get("id") == part_id(tool_call_id):
            if isinstance(data, dict) and isinstance(data.get("taskId"), str):
                return TaskSeen(
                    task_id=data["taskId"],
                    status=str(data.get("status") or "working"),
                    status_message=data.get("statusMessage"),
                    poll_interval_ms=data.get("pollIntervalMs"),
                    started_at=float(data.get("startedAt") or 0.0),
                )
    return None


def open_tasks(parts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """`(server, task id)` of every call's task the log last saw running: what a turn that
    ends leaves for `tasks/cancel`."""
    found: list[tuple[str, str]] = []
    for part in parts:
        data = part.get("data")
        if part.get("type") == TASK_PART and isinstance(data, dict):
            if data.get("status") not in TERMINAL and isinstance(data.get("taskId"), str):
                found.append((str(data.get("server")), data["taskId"]))
    return found
