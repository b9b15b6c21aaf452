"""A real MCP server whose long-running tool runs as a task: the `io.modelcontextprotocol/tasks`
extension of the 2026-07-28 protocol (SEP-2663; its text: modelcontextprotocol/ext-tasks,
`specification/draft/tasks.md`). The `mcp` SDK (2.3) serves extensions (`Extension`: a
`tools/call` interceptor, new methods) but ships no task support, so the task side is written
here to that text:

- a `tools/call` of `build` from a client that declared the extension in the request's
  capabilities is answered at once with a `CreateTaskResult` (`resultType: "task"`, the `Task`
  fields), only once the task is durably stored; from any other client, it blocks and answers
  with the result ("A server MUST NOT return CreateTaskResult to a client that did not include
  the extension capability on its request");
- `tasks/get` answers the `DetailedTask`: `statusMessage` "step i of n" while `working`, the
  `CallToolResult` inlined as `result` once `completed`; `resultType` "complete";
- `tasks/cancel` acknowledges with an empty result and stops the work between two steps
  (cooperative, eventually `cancelled`);
- `deploy` asks mid-task: the task moves to `input_required`, its `inputRequests` hold an
  elicitation under a key used once, and `tasks/update` takes the `inputResponses` for the keys
  outstanding (others are ignored); without the extension it is error `-32021`;
- an unknown `taskId` is a JSON-RPC error.

Its tasks are files under the directory it is given: a task outlives the server process that
started it, and every server process given the directory reads it. That is what a server
behind several Perdure workers needs (the SDK's examples keep tasks in memory, one process).

`jobs.py <fd> <dir>`: streamable HTTP on the inherited listening socket `fd`. Each start of a
build appends its name to `<dir>/started`, each cancel honoured to `<dir>/cancelled`.
"""

import asyncio
import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    RequestParams,
)

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 200
TTL_MS = 3_600_000
TERMINAL = ("completed", "failed", "cancelled")
INVALID_PARAMS = -32602
MISSING_CAPABILITY = -32021
ANSWER_WAIT_SECONDS = 600.0
TASK_TOOLS = ("build", "deploy")


async def deploy(name: str) -> str:
    """Deploy `name` once a person confirms (asked mid-task; a task only)."""
    raise MCPError(
        code=MISSING_CAPABILITY,
        message="Missing required client capability",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


async def build(name: str, steps: int, seconds: float) -> str:
    """Build `name` in `steps` steps of `seconds` each (runs as a task for clients that can)."""
    for _ in range(steps):
        await anyio.sleep(seconds)
    return f"built {name}"


class TaskParams(RequestParams):
    task_id: str  # `taskId` on the wire


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]  # `inputResponses` on the wire


class Tasks:
    """The tasks, one JSON file each: written whole and renamed, so a reader never sees half."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.running: set[asyncio.Task[None]] = set()

    def path(self, task_id: str) -> Path:
        return self.directory / f"task-{task_id}.json"

    def read(self, task_id: str) -> dict[str, Any]:
        if not all(c.isalnum() or c == "-" for c in task_id) or not self.path(task_id).exists():
            raise MCPError(code=INVALID_PARAMS, message=f"unknown task {task_id!r}")
        return dict(json.loads(self.path(task_id).read_text()))

    def write(self, task: dict[str, Any]) -> None:
        task["lastUpdatedAt"] = _now()
        staged = self.path(task["taskId"]).with_suffix(".tmp")
        staged.write_text(json.dumps(task))
        staged.replace(self.path(task["taskId"]))

    def note(self, file: str, line: str) -> None:
        with (self.directory / file).open("a") as out:
            out.write(line + "\n")

    def create(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        task: dict[str, Any] = {
            "taskId": str(uuid.uuid4()),
            "status": "working",
            "statusMessage": "queued",
            "createdAt": _now(),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
            "tool": tool,
            "arguments": arguments,
            "cancelRequested": False,
            "responses": {},
        }
        self.write(task)
        work = self.work if tool == "build" else self.deploy
        worker = asyncio.get_running_loop().create_task(work(task["taskId"]))
        self.running.add(worker)
        worker.add_done_callback(self.running.discard)
        return task

    async def work(self, task_id: str) -> None:
        task = self.read(task_id)
        arguments = task["arguments"]
        self.note("started", str(arguments["name"]))
        steps = int(arguments["steps"])
        for step in range(steps):
            await asyncio.sleep(float(arguments["seconds"]))
            task = self.read(task_id)
            if task["cancelRequested"]:
                task.update(status="cancelled", statusMessage=f"cancelled at step {step + 1}")
                self.write(task)
                self.note("cancelled", str(arguments["name"]))
                return
            task["statusMessage"] = f"step {step + 1} of {steps}"
            self.write(task)
        task["status"] = "completed"
        task["statusMessage"] = "done"
        task["result"] = {
            "content": [{"type": "text", "text": f"built {arguments['name']}"}],
            "isError": False,
        }
        self.write(task)

    async def deploy(self, task_id: str) -> None:
        """Asks a person to confirm (status `input_required`, the question in
        `inputRequests` under a key used once), then deploys or not as answered."""
        task = self.read(task_id)
        name = str(task["arguments"]["name"])
        self.note("started", name)
        key = f"confirm-{task_id}"
        schema: dict[str, Any] = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
        schema["required"] = ["confirm"]
        question = ElicitRequest(
            params=ElicitRequestFormParams(message=f"Deploy {name}?", requested_schema=schema)
        )
        task.update(
            status="input_required",
            statusMessage="waiting for a confirmation",
            inputRequests={key: question.model_dump(by_alias=True, mode="json", exclude_none=True)},
        )
        self.write(task)
        with anyio.fail_after(ANSWER_WAIT_SECONDS):
            while key not in (task := self.read(task_id))["responses"]:
                await asyncio.sleep(0.1)
        answer = task["responses"][key]
        confirmed = answer.get("action") == "accept" and (answer.get("content") or {}).get(
            "confirm"
        )
        task.pop("inputRequests", None)
        task.update(status="completed", statusMessage="done")
        text = f"deployed {name}" if confirmed else f"not deployed {name}: {answer.get('action')}"
        task["result"] = {"content": [{"type": "text", "text": text}], "isError": False}
        self.write(task)


def detailed(task: dict[str, Any]) -> dict[str, Any]:
    """`GetTaskResult`: the task's fields, its result inlined once completed, its questions
    while `input_required`."""
    private = ("tool", "arguments", "cancelRequested", "responses")
    shown = {key: value for key, value in task.items() if key not in private}
    return {"resultType": "complete", **shown}


class TasksExtension(Extension):
    identifier = EXTENSION

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
            MethodBinding("tasks/update", UpdateParams, self.update),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        capabilities = ctx.session.client_capabilities
        declared = EXTENSION in ((capabilities.extensions or {}) if capabilities else {})
        if params.name not in TASK_TOOLS or not declared:
            return await call_next(ctx)
        task = self.tasks.create(params.name, dict(params.arguments or {}))
        created = detailed(task)
        created["resultType"] = "task"
        return created

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        return detailed(self.tasks.read(params.task_id))

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> HandlerResult:
        task = self.tasks.read(params.task_id)
        if task["status"] not in TERMINAL:
            task["cancelRequested"] = True
            self.tasks.write(task)
        return {"resultType": "complete"}

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateParams
    ) -> HandlerResult:
        """Takes the responses to outstanding keys; others are ignored, as the text says."""
        task = self.tasks.read(params.task_id)
        outstanding = task.get("inputRequests") or {}
        for key, response in params.input_responses.items():
            if key in outstanding and key not in task["responses"]:
                task["responses"][key] = response
        self.tasks.write(task)
        return {"resultType": "complete"}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def serve(fd: int, directory: Path) -> None:
    import socket

    import uvicorn

    app = MCPServer("jobs", extensions=[TasksExtension(Tasks(directory))])
    app.tool()(build)
    app.tool()(deploy)
    config = uvicorn.Config(
        app.streamable_http_app(), log_level="warning", lifespan="on", timeout_graceful_shutdown=2
    )
    anyio.run(uvicorn.Server(config).serve, [socket.socket(fileno=fd)])


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))
