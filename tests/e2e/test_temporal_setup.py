"""`perdure temporal-setup` registers Perdure's search attributes on a Temporal that lacks them,
once; until it has run, workers and gateways say so instead of failing obscurely."""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from perdure.domain.turn_labels import TURN_ATTRIBUTES
from perdure.runtime.temporal_dev import temporal_binary
from perdure.runtime.temporal_setup import TemporalSetupNeeded, require_search_attributes
from perdure.testing.chat_client import user_message
from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import inherited_environment
from perdure.testing.stack import free_port, running_stack
from tests.served import STACK_AGENTS

REPO = Path(__file__).parents[2]
NAMES = [key.name for key in TURN_ATTRIBUTES]


@pytest.fixture
async def bare_temporal() -> AsyncIterator[WorkflowEnvironment]:
    """A Temporal dev server started without Perdure's search attributes, as a cluster is."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
    )
    yield env
    await env.shutdown()


async def perdure(
    spawner: ProcessSpawner, command: str, temporal: WorkflowEnvironment, data_dir: Path
) -> tuple[int, str, str]:
    """`perdure <command>` against `temporal`, to its end: exit code, output and error."""
    env = {
        **inherited_environment(),
        "PYTHONPATH": str(REPO),
        "PERDURE_DATA_DIR": str(data_dir),
        "TEMPORAL_ADDRESS": temporal.client.service_client.config.target_host,
    }
    done = await asyncio.to_thread(spawner.run, [command], env, cwd=data_dir)
    return done.returncode, done.stdout, done.stderr


async def test_the_setup_command_registers_the_search_attributes_once(
    bare_temporal: WorkflowEnvironment, tmp_path: Path, spawner: ProcessSpawner
) -> None:
    client = bare_temporal.client
    with pytest.raises(TemporalSetupNeeded, match="run `perdure temporal-setup`"):
        await require_search_attributes(client, "default")

    first = await perdure(spawner, "temporal-setup", bare_temporal, tmp_path)
    again = await perdure(spawner, "temporal-setup", bare_temporal, tmp_path)

    assert first[0] == 0, first[2]
    assert first[1].strip().endswith(f"{', '.join(NAMES)} (Keyword)")
    assert again[0] == 0, again[2]
    assert "has Perdure's search attributes already" in again[1]
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    assert {name: listed.custom_attributes[name] for name in NAMES} == dict.fromkeys(
        NAMES, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    )
    await require_search_attributes(client, "default")


@pytest.mark.parametrize("command", ["worker", "gateway"])
async def test_a_process_refuses_to_start_on_a_temporal_without_them(
    command: str, bare_temporal: WorkflowEnvironment, tmp_path: Path, spawner: ProcessSpawner
) -> None:
    code, _, stderr = await perdure(spawner, command, bare_temporal, tmp_path)

    assert code != 0
    assert "Traceback" not in stderr
    last_line = stderr.strip().splitlines()[-1]
    assert last_line == (
        f"perdure: the Temporal namespace 'default' lacks Perdure's search attributes "
        f"({', '.join(NAMES)}): run `perdure temporal-setup` once against it "
        "(docs/operations.md)"
    )


async def test_a_turn_temporal_refuses_for_want_of_them_is_a_clear_503(
    bare_temporal: WorkflowEnvironment, tmp_path: Path, provider_env: None
) -> None:
    """Removed after the gateway started (or never checked): the failing call says it all."""
    chat = f"setup-{uuid.uuid4().hex[:8]}"
    async with (
        running_stack(
            client=bare_temporal.client,
            database_url=f"sqlite:///{tmp_path}/p.db",
            data_dir=tmp_path,
            agents=STACK_AGENTS,
        ) as stack,
        httpx.AsyncClient(base_url=stack.url, timeout=30) as http,
    ):
        refused = await http.post(
            "/api/chat", json={"id": chat, "messages": [user_message("hello")]}
        )
        submissions = await http.get(f"/v1/sessions/{chat}/submissions")

    assert refused.status_code == 503
    assert refused.headers["retry-after"]
    error = refused.json()["error"]
    assert error["code"] == "temporal_setup_required"
    assert "run `perdure temporal-setup`" in error["message"]
    assert submissions.status_code == 404 or submissions.json()["count"] == 0


async def failed_start(
    spawner: ProcessSpawner, command: str, tmp_path: Path, **env: str
) -> tuple[int, str]:
    """`perdure <command>` with only `env` set of Perdure's and Temporal's variables: its exit
    code and standard error."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("PERDURE_", "TEMPORAL_"))}
    done = await asyncio.to_thread(
        spawner.run,
        [command],
        {**inherited, "PYTHONPATH": str(REPO), "PERDURE_DATA_DIR": str(tmp_path), **env},
        cwd=tmp_path,
    )
    return done.returncode, done.stderr


async def test_unusable_tls_settings_stop_the_command_with_one_clear_line(
    tmp_path: Path, spawner: ProcessSpawner
) -> None:
    code, stderr = await failed_start(
        spawner,
        "temporal-setup",
        tmp_path,
        TEMPORAL_API_KEY="secret-key",
        TEMPORAL_TLS_CLIENT_CERT_PATH=str(tmp_path / "missing.pem"),
        TEMPORAL_TLS_CLIENT_KEY_PATH=str(tmp_path / "missing.key"),
    )

    assert code == 1
    assert "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith("perdure: the Temporal connection settings (TEMPORAL_API_KEY, TEMPORAL_TLS*")
    )
    assert "secret-key" not in stderr


@pytest.mark.parametrize("command", ["worker", "gateway", "serve"])
async def test_a_temporal_that_does_not_answer_stops_the_process_with_one_clear_line(
    command: str, tmp_path: Path, spawner: ProcessSpawner
) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, stderr = await failed_start(
        spawner, command, tmp_path, PERDURE_PORT=str(free_port()), TEMPORAL_ADDRESS=address
    )

    assert code == 1
    assert "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith(f"perdure: cannot reach Temporal at {address} (TEMPORAL_ADDRESS)")
    )
