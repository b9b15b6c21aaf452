"""Perdure as real OS processes (`perdure dev | worker | gateway`), for process-level tests."""

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Protocol

import httpx

PERDURE = str(Path(sys.executable).parent / "perdure")
_PR_SET_PDEATHSIG = 1


def inherited_environment() -> dict[str, str]:
    """This process's environment without its `PERDURE_*` settings: what a started `perdure`
    process inherits before the settings it is given."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PERDURE_")}


def die_with_parent() -> None:
    """Runs in the child: a test or benchmark killed abruptly leaves no stray server behind."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Started(Protocol):
    """A started process, as `subprocess.Popen` offers it."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Starter(Protocol):
    """Starts `perdure <command>` with exactly `env`, its output to `log_path`."""

    def start(self, command: str, env: dict[str, str], log_path: Path) -> Started: ...


class ExecutableStarter:
    """Runs the `perdure` executable, as a user does."""

    def start(self, command: str, env: dict[str, str], log_path: Path) -> Started:
        with open(log_path, "ab") as log:  # the child holds its own copy
            return subprocess.Popen(
                [PERDURE, command],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )


class PerdureProcess:
    """One `perdure <command>` process; its output goes to a log file for post-mortems."""

    def __init__(
        self,
        command: str,
        env: dict[str, str],
        log_dir: Path,
        starter: Starter | None = None,
    ) -> None:
        self.command = command
        self.env = env
        self.log_path = log_dir / f"{command}-{os.getpid()}-{id(self)}.log"
        self.process: Started | None = None
        self._starter = starter or ExecutableStarter()

    def start(self) -> "PerdureProcess":
        environment = {**inherited_environment(), **self.env}
        self.process = self._starter.start(self.command, environment, self.log_path)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, like a crashed machine."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def terminate(self) -> None:
        """SIGTERM, as a deploy sends it; returns at once (see `wait_exit`)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    async def wait_exit(self, timeout: float = 60) -> int:
        """Wait until the process has exited; its exit code."""
        assert self.process is not None, "not started"
        deadline = asyncio.get_running_loop().time() + timeout
        while (code := self.process.poll()) is None:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"perdure {self.command} still running after {timeout} s")
            await asyncio.sleep(0.05)
        return code

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


async def wait_healthy(url: str, process: PerdureProcess, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while asyncio.get_running_loop().time() < deadline:
            if process.process is not None and process.process.poll() is not None:
                raise AssertionError(f"perdure {process.command} exited:\n{process.output()}")
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} not healthy after {timeout} s:\n{process.output()}")
