"""`dev_server` (what `perdure dev` and the multi-process tests start Temporal with) retries a
start whose process exits before it serves, and reports a start that cannot succeed with the
server's own words instead of waiting for a port."""

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from perdure.runtime.temporal_dev import START_ATTEMPTS, DevServerExited, dev_server
from perdure.testing.stack import free_port
from tests.waiting import eventually


@contextmanager
def occupied_port() -> Iterator[socket.socket]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


@pytest.mark.timeout(120)
async def test_a_start_that_cannot_bind_ends_with_the_servers_log(tmp_path: Path) -> None:
    with occupied_port() as taken:
        ui_port = taken.getsockname()[1]
        with pytest.raises(DevServerExited) as raised:
            async with dev_server(
                address=f"127.0.0.1:{free_port()}",
                ui_port=ui_port,
                db_file=tmp_path / "temporal.db",
                namespace="default",
            ):
                pytest.fail("the dev server served on a taken UI port")

    assert f"can't set UI port {ui_port}" in str(raised.value)
    log = (tmp_path / "temporal.log").read_text()
    assert log.count("--- start attempt") == START_ATTEMPTS


async def release_after_first_failure(listener: socket.socket, log_file: Path) -> None:
    def refused() -> bool:
        return "address already in use" in (log_file.read_text() if log_file.exists() else "")

    await eventually(refused, what="a start attempt refused the taken port", timeout=60)
    listener.close()


@pytest.mark.timeout(120)
async def test_a_start_whose_port_is_taken_for_a_moment_is_tried_again(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    with occupied_port() as taken:
        ui_port = taken.getsockname()[1]
        releasing = asyncio.create_task(
            release_after_first_failure(taken, tmp_path / "temporal.log")
        )
        async with dev_server(
            address=address,
            ui_port=ui_port,
            db_file=tmp_path / "temporal.db",
            namespace="default",
        ) as server:
            assert server is not None
            assert server.poll() is None
        await releasing

    log = (tmp_path / "temporal.log").read_text()
    assert "--- start attempt 2" in log
