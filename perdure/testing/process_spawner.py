"""Starts `perdure <command>` processes by forking one that has already imported the server.

A `perdure worker` or `gateway` spends most of its first two seconds of CPU importing
(Temporal's SDK, SQLAlchemy, FastAPI, the provider SDKs). Tests that start dozens of them fork
each from a spawner that imported all that once. The child is a new OS process, in a session of
its own, that runs the `perdure` executable's `main` with its own arguments, environment,
working directory and log; it is signalled, killed and reaped like any other process. What
differs from starting the executable: the modules are not imported again, so the interpreter's
own options (the `PYTHON*` variables other than `PYTHONPATH`) are the spawner's, and a request
that sets them otherwise is refused.

The spawner forks only while it has a single thread (no Temporal runtime, no event loop), which
it checks before it answers its first request.
"""

import atexit
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from perdure.testing.processes import PERDURE, die_with_parent, inherited_environment

PRELOADED = (
    "perdure.commands.launcher",
    "perdure.commands.cli",
    "perdure.runtime.worker",
    "perdure.runtime.relay_service",
    "gateway.app",
    "activities.providers.openai_chat",
    "activities.providers.openai_responses",
    "activities.providers.anthropic_messages",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "perdure.testing.agents",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
)
"""What the commands import (the server, the worker, the relay, the provider and MCP SDKs a
worker imports before it polls, the test agents); anything else is imported by the child."""


def _interpreter_options(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


class SpawnedProcess:
    """A process the spawner forked: what `subprocess.Popen` offers the tests, by pid."""

    def __init__(self, spawner: "ProcessSpawner", pid: int) -> None:
        self._spawner = spawner
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._spawner.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code, once it has exited (`subprocess.TimeoutExpired` after `timeout`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.02)
        return code


class ProcessSpawner:
    """The test side: one spawner process, asked over a pipe to fork and to report exits."""

    def __init__(self) -> None:
        env = inherited_environment()
        env.pop("PYTHONPATH", None)
        self._options = _interpreter_options(env)
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from perdure.testing.process_spawner import serve; serve()"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            requests, replies = self._process.stdin, self._process.stdout
            assert requests is not None and replies is not None
            requests.write(json.dumps(request).encode() + b"\n")
            requests.flush()
            line = replies.readline()
        if not line:
            raise RuntimeError(f"the process spawner exited ({self._process.wait()})")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the process spawner could not start it: {reply['error']}")
        return reply

    def start(self, command: str, env: Mapping[str, str], log_path: Path) -> SpawnedProcess:
        """`perdure <command>` with exactly `env` as its environment, output to `log_path`."""
        return self.launch([command], env, cwd=Path.cwd(), output=log_path)

    def launch(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: Path,
        output: Path,
        errors: Path | None = None,
    ) -> SpawnedProcess:
        """`perdure <args...>` in `cwd` with exactly `env`; standard output to `output`,
        standard error to `errors` (or `output` too)."""
        if _interpreter_options(env) != self._options:
            raise ValueError(
                "a forked process keeps the spawner's interpreter options; these differ: "
                f"{sorted(set(_interpreter_options(env).items()) ^ set(self._options.items()))}"
            )
        request = {
            "op": "start",
            "argv": [PERDURE, *args],
            "env": dict(env),
            "cwd": str(cwd),
            "log": str(output),
            "errors": str(errors or output),
        }
        return SpawnedProcess(self, int(self._ask(request)["pid"]))

    def run(
        self, args: Sequence[str], env: Mapping[str, str], *, cwd: Path, timeout: float = 60
    ) -> "subprocess.CompletedProcess[str]":
        """`perdure <args...>` to its end, as `subprocess.run(..., capture_output=True,
        text=True)` reports it; its output is kept outside `cwd`, which it leaves as it was."""
        with tempfile.TemporaryDirectory(prefix="perdure-run-") as kept:
            output, errors = Path(kept) / "stdout", Path(kept) / "stderr"
            process = self.launch(args, env, cwd=cwd, output=output, errors=errors)
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                raise
            return subprocess.CompletedProcess(
                [PERDURE, *args],
                code,
                output.read_text(errors="replace"),
                errors.read_text(errors="replace"),
            )

    def exit_code(self, pid: int) -> int | None:
        code = self._ask({"op": "exit_code", "pid": pid})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        """Stops the spawner; a child still running is killed with it (it dies with its parent)."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


@contextlib.contextmanager
def process_spawner() -> Iterator[ProcessSpawner]:
    spawner = ProcessSpawner()
    try:
        yield spawner
    finally:
        spawner.close()


# The spawner's side.


def serve() -> None:
    """The spawner process: import, check it may fork, then answer one request per line."""
    for module in PRELOADED:
        importlib.import_module(module)
    # A Temporal worker's default build id hashes the bytecode of every loaded module, half a
    # second of CPU at each worker's start: the SDK keeps it once computed, so the children
    # inherit it (a hash of the code the spawner loaded, which is the whole server).
    from temporalio.worker._worker import load_default_build_id

    load_default_build_id()
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise SystemExit(f"the spawner has {threads} threads after its imports: it cannot fork")
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    exited: dict[int, int] = {}
    for line in requests:
        request = json.loads(line)
        try:
            if request["op"] == "start":
                reply: dict[str, Any] = {"pid": _fork(request)}
            else:
                reply = {"code": _exit_code(int(request["pid"]), exited)}
        except OSError as error:
            reply = {"error": f"{type(error).__name__}: {error}"}
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()


def _exit_code(pid: int, exited: dict[int, int]) -> int | None:
    if pid in exited:
        return exited[pid]
    done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        return None
    exited[pid] = os.waitstatus_to_exitcode(status)
    return exited[pid]


def _fork(request: dict[str, Any]) -> int:
    """The child's pid, once it leads a session of its own (so that its process group can be
    signalled at once, as `subprocess.Popen(start_new_session=True)` guarantees)."""
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    errors = os.open(request["errors"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    in_session, told = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (log, errors, in_session, told):
            os.close(fd)
        raise
    if pid == 0:
        os.close(in_session)
        _run_child(request, (log, errors), told)
    os.close(log)
    os.close(errors)
    os.close(told)
    os.read(in_session, 1)  # end of file: the child has closed its end, or exited
    os.close(in_session)
    return pid


def _run_child(request: dict[str, Any], outputs: tuple[int, int], told: int) -> NoReturn:
    """In the child: become the `perdure` command, as its executable would start it."""
    code = 1
    try:
        os.setsid()
        os.close(told)
        die_with_parent()
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.dup2(outputs[0], 1)
        os.dup2(outputs[1], 2)
        for fd in (nothing, *outputs):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv: list[str] = request["argv"]
        sys.argv = argv
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        # The executable's directory first, then PYTHONPATH, as the interpreter orders them.
        sys.path[:1] = [str(Path(argv[0]).parent), *extra]
        importlib.invalidate_caches()
        from perdure.commands.launcher import main

        main()
        code = 0
    except SystemExit as exit:
        code = _status(exit.code)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
