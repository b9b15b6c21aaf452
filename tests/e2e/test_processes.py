"""Perdure as its users run it: `perdure dev`, and separate worker and gateway processes."""

import asyncio
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from perdure.testing.chat_client import counting, send
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import PerdureProcess, wait_healthy
from perdure.testing.stack import free_port
from tests.databases import database_url


@pytest.fixture
def processes() -> Iterator[list[PerdureProcess]]:
    """The processes a spec started, stopped at its end. They are forked from the `spawner`,
    which runs the executable's `main` in a process of its own (perdure/testing/process_spawner.py):
    the same command, without importing the server again."""
    started: list[PerdureProcess] = []
    yield started
    for process in started:
        process.stop()


async def started_dev(
    tmp_path: Path, processes: list[PerdureProcess], spawner: ProcessSpawner, **env: str
) -> tuple[PerdureProcess, str]:
    """`perdure dev` on free ports with its data in `tmp_path`, once it answers: it and its URL."""
    port = free_port()
    dev = PerdureProcess(
        "dev",
        {
            "PERDURE_PORT": str(port),
            "PERDURE_DATA_DIR": str(tmp_path / ".perdure"),
            "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
            "PERDURE_TEMPORAL_UI_PORT": str(free_port()),
            **env,
        },
        tmp_path,
        spawner,
    ).start()
    processes.append(dev)
    url = f"http://127.0.0.1:{port}"
    await wait_healthy(url, dev, timeout=90)
    return dev, url


@pytest.mark.long
async def test_perdure_dev_starts_everything_and_answers_with_the_demo_model(
    tmp_path: Path,
    processes: list[PerdureProcess],
    spawner: ProcessSpawner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    dev, url = await started_dev(tmp_path, processes, spawner)

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        streamed = await send(http, "dev-chat", "what is 12*7")

    assert streamed.text().startswith("[demo model]")
    assert "84" in streamed.text()
    assert "tool-output-available" in streamed.types()
    assert (tmp_path / ".perdure" / "perdure.db").exists()
    assert (tmp_path / ".perdure" / "temporal.db").exists()


@pytest.mark.long
async def test_perdure_dev_streams_provider_answers_through_its_in_process_relay(
    tmp_path: Path,
    processes: list[PerdureProcess],
    spawner: ProcessSpawner,
    fake_provider: FakeProvider,
) -> None:
    dev, url = await started_dev(
        tmp_path,
        processes,
        spawner,
        PERDURE_MODEL="openai:gpt-fake",
        **fake_provider.env(),
    )
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        streamed = await send(http, "relayed-chat", f"@count 12 {uuid.uuid4().hex[:6]}")
    (relay,) = re.findall(r"relay +(http://127\.0\.0\.1:\d+) \(in-process\)", dev.output())
    async with httpx.AsyncClient(base_url=relay, timeout=10) as http:
        held = (await http.get("/stats")).json()

    assert streamed.text() == counting(12)
    assert held["streams"] == 1  # the answer's one step, held by the relay


@pytest.mark.long
async def test_perdure_dev_starts_quietly_and_a_process_managers_sigterm_stops_it_cleanly(
    tmp_path: Path, processes: list[PerdureProcess], spawner: ProcessSpawner
) -> None:
    """A process manager signals the whole group, and `make run` forwards the same signal a
    moment later: the two are one stop, not a forced one."""
    dev, url = await started_dev(tmp_path, processes, spawner, PERDURE_MODEL="demo")
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        await send(http, "quiet-chat", "hello")

    dev.terminate()
    await asyncio.sleep(0.05)  # the scenario: the second signal a moment after the first
    dev.terminate()
    code = await dev.wait_exit(timeout=60)

    output = dev.output()
    assert code == 0, output
    assert "Perdure is running" in output
    assert "alembic" not in output, output  # no migration chatter unless asked
    assert "Traceback" not in output and " ERROR " not in output, output
    assert "second signal" not in output, output


@pytest.mark.long
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_separate_worker_and_gateway_processes_stream_a_turn(
    backend: str,
    tmp_path: Path,
    processes: list[PerdureProcess],
    spawner: ProcessSpawner,
    temporal_env: WorkflowEnvironment,
    provider_env: None,
) -> None:
    with database_url(backend, tmp_path) as url:
        port = free_port()
        env = {
            "PERDURE_DATABASE_URL": url,
            "PERDURE_DATA_DIR": str(tmp_path),
            "PERDURE_TASK_QUEUE": f"proc-{uuid.uuid4().hex[:8]}",
            "PERDURE_MODEL": "openai:gpt-fake",
            "PERDURE_PORT": str(port),
            "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        }
        worker = PerdureProcess("worker", env, tmp_path, spawner).start()
        gateway = PerdureProcess("gateway", env, tmp_path, spawner).start()
        processes.extend([worker, gateway])
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, gateway)

        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            streamed = await send(http, f"proc-{backend}", "@count 40 @delay 2")

        assert streamed.text() == counting(40), worker.output()
        assert streamed.types()[-1] == "finish"
        for process in processes:
            process.stop()
