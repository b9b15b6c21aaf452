"""An MCP call the server turns into a task (the `io.modelcontextprotocol/tasks` extension;
docs/mcp.md#tasks), against a real server built with the SDK (tests/mcp_servers/jobs.py): the
task is followed to its result with its progress in the stream, cancelled on a stop, and
followed by the next worker when the one following it is SIGKILLed."""

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.testing.chat_client import chat_body, send, user_message
from perdure.testing.cluster import Cluster, LiveStream, wait_until
from tests.e2e.test_mcp_input import answered, question_of
from tests.mcp_task_agents import JOBS_URL, jobs_server_command
from tests.served import CLUSTER_AGENTS, Served


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The jobs server over streamable HTTP; its tasks and records in the directory yielded."""
    directory = tmp_path_factory.mktemp("jobs")
    command, listener = jobs_server_command(directory)
    process = subprocess.Popen(command, pass_fds=[listener])
    try:
        yield directory
    finally:
        process.kill()  # its listen streams would hold a graceful stop for seconds
        process.wait(10)


def lines(directory: Path, name: str) -> list[str]:
    path = directory / name
    return path.read_text().splitlines() if path.exists() else []


def build(name: str, steps: int, seconds: float) -> str:
    return f'@tool jobs__build {{"name": "{name}", "steps": {steps}, "seconds": {seconds}}}'


def task_updates(chunks: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [
        (c["data"]["status"], c["data"]["statusMessage"])
        for c in chunks
        if c["type"] == "data-mcp-task"
    ]


def new_session() -> str:
    return f"mcp-task-{uuid.uuid4().hex[:10]}"


async def test_a_call_the_server_makes_a_task_is_followed_to_its_result_with_its_progress_shown(
    http: httpx.AsyncClient, jobs: Path
) -> None:
    name = uuid.uuid4().hex[:8]

    streamed = await send(http, new_session(), build(name, 3, 0.3), agent="mcp-jobs")

    outputs = [c for c in streamed.chunks if c["type"] == "tool-output-available"]
    assert [c["output"] for c in outputs] == [f"built {name}"]
    updates = task_updates(streamed.chunks)
    assert updates[0] == ("working", "queued")
    assert ("working", "step 2 of 3") in updates
    assert updates[-1] == ("completed", "done")
    assert lines(jobs, "started").count(name) == 1


async def test_a_stop_while_a_task_runs_cancels_it_at_the_server(
    http: httpx.AsyncClient, jobs: Path
) -> None:
    session, name = new_session(), uuid.uuid4().hex[:8]
    answer = asyncio.create_task(send(http, session, build(name, 40, 0.5), agent="mcp-jobs"))
    await wait_until(lambda: name in lines(jobs, "started"), timeout=30)

    stopped = await http.post(f"/api/chat/{session}/stop")

    assert stopped.json()["result"] == "stopped"
    streamed = await answer
    assert streamed.chunks[-1]["type"] == "abort"
    await wait_until(lambda: name in lines(jobs, "cancelled"), timeout=30)
    following = await send(http, session, "@count 2", agent="mcp-jobs")
    assert following.text() == "1 2"


async def test_a_task_that_asks_parks_the_turn_and_takes_the_answer_by_tasks_update(
    http: httpx.AsyncClient, jobs: Path
) -> None:
    session, name = new_session(), uuid.uuid4().hex[:8]
    call = f'@tool jobs__deploy {{"name": "{name}"}}'

    parked = await send(http, session, call, agent="mcp-jobs")

    assert parked.types()[-2:] == ["data-input-request", "finish"]
    assert ("input_required", "waiting for a confirmation") in task_updates(parked.chunks)
    question = question_of(parked)
    assert [q["message"] for q in question["questions"]] == [f"Deploy {name}?"]
    key = question["questions"][0]["key"]
    continued = await answered(
        http, session, parked, **{key: {"action": "accept", "content": {"confirm": True}}}
    )
    outputs = [c for c in continued.chunks if c["type"].startswith("tool-output")]
    assert [c.get("output") for c in outputs] == [f"deployed {name}"]
    assert lines(jobs, "started").count(name) == 1  # the same task, answered: not a new call


@pytest.fixture
def served() -> Served:
    return Served(agents=f"{CLUSTER_AGENTS},tests.mcp_task_agents")


async def killed_while_following(
    cluster: Cluster, jobs: Path, name: str, steps: int, *, stop: bool = False
) -> tuple[LiveStream, httpx.Response | None]:
    """A turn that calls `build` for `steps` half-second steps; the worker following its task
    SIGKILLed at step 2 (then, with `stop`, the turn stopped), a new one started; the stream,
    read to its end, and the stop's answer. With `stop`, waits until the server recorded the
    cancel (the new worker is needed for it)."""
    session = new_session()
    environment = {"PERDURE_TEST_JOBS_URL": JOBS_URL}
    stopped = None
    async with cluster.temporal():
        worker = cluster.worker(**environment)
        url = await cluster.gateway()
        stream = LiveStream()
        async with httpx.AsyncClient(base_url=url, timeout=90) as http:
            body = chat_body(session, user_message(build(name, steps, 0.5)), agent="mcp-jobs")
            async with http.stream("POST", "/api/chat", json=body) as response:
                reader = asyncio.create_task(stream.read(response))
                step_2 = f"step 2 of {steps}"
                await wait_until(
                    lambda: any(s == step_2 for _, s in task_updates(_chunks(stream))),
                    timeout=60,
                )
                worker.kill()
                if stop:
                    stopped = await http.post(f"/api/chat/{session}/stop")
                cluster.worker(**environment)
                await asyncio.wait_for(reader, timeout=90)
            if stop:
                await wait_until(lambda: name in lines(jobs, "cancelled"), timeout=60)
    return stream, stopped


@pytest.mark.long
# One store: what is under test is the task going from one worker to the next (the input spec
# of tests/e2e/test_mcp_worker_kill.py takes SQLite).
@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_task_followed_by_a_worker_killed_meanwhile_is_followed_by_the_next(
    cluster: Cluster, jobs: Path
) -> None:
    """The tool is not idempotent: without its task it would be reported interrupted."""
    name = uuid.uuid4().hex[:8]

    stream, _ = await killed_while_following(cluster, jobs, name, 16)

    outputs = [c for c in _chunks(stream) if c["type"].startswith("tool-output")]
    assert [(c["type"], c.get("output")) for c in outputs] == [
        ("tool-output-available", f"built {name}")
    ]
    assert lines(jobs, "started").count(name) == 1  # followed, never started again
    assert task_updates(_chunks(stream))[-1] == ("completed", "done")


@pytest.mark.long
@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_stop_after_the_worker_following_a_task_died_still_cancels_the_task(
    cluster: Cluster, jobs: Path
) -> None:
    """No live call is left to send `tasks/cancel`: the turn's finish sends it."""
    name = uuid.uuid4().hex[:8]

    stream, stopped = await killed_while_following(cluster, jobs, name, 120, stop=True)

    assert stopped is not None and stopped.json()["result"] == "stopped"
    assert _chunks(stream)[-1]["type"] == "abort"
    assert name in lines(jobs, "cancelled")


def _chunks(stream: LiveStream) -> list[dict[str, Any]]:
    return [chunk for _, chunk in stream.events]


async def test_a_client_that_does_not_declare_tasks_gets_the_result_in_the_call(
    jobs: Path,
) -> None:
    """The server's side, as the extension's text says: no task for a client that did not
    declare the extension (the SDK's own client, here)."""
    from mcp import Client

    async with Client(JOBS_URL) as client:
        result = await client.call_tool("build", {"name": "plain", "steps": 1, "seconds": 0.1})

    assert result.structured_content == {"result": "built plain"}
