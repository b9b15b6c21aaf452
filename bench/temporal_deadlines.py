"""How fast the gateway's Temporal calls fail when Temporal is down, two ways side by side.

    .venv/bin/python -m bench.temporal_deadlines [--runs 3] [--burst 300]

- **probe**: the gateway's way (`gateway/temporal.py`): the client's default retries, a call
  still running after 0.25 s is checked with a shared health probe, a 15 s deadline.
- **client config**: the Temporal client's own knobs only: `RetryConfig(max_elapsed_time_millis=1000)`
  on the connection and `rpc_timeout=15 s` on each call.

Three cases, each on a dev server of its own: the server killed (connection refused), the
server hung (SIGSTOP: connections open, nothing answers), and a burst of `--burst` starts at
once on a live server (does either way fail a call that would have succeeded?). Prints the
time to the failure per case and way, and the burst's failures and p95.
"""

import argparse
import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from temporalio.client import Client
from temporalio.service import RetryConfig

from bench._support import p50_p95
from gateway.errors import ApiError
from gateway.temporal import GatewayDeadline
from perdure.runtime.temporal_dev import dev_server
from perdure.testing.stack import free_port

RPC_TIMEOUT = timedelta(seconds=15)
CLIENT_RETRY = RetryConfig(max_elapsed_time_millis=1000)
QUEUE = "deadline-bench"  # no worker polls it: a start only records the workflow


@contextlib.asynccontextmanager
async def server(directory: Path) -> AsyncIterator[tuple[str, int]]:
    address = f"127.0.0.1:{free_port()}"
    async with dev_server(
        address=address, ui_port=None, db_file=directory / "t.db", namespace="default"
    ) as process:
        assert process is not None
        try:
            yield address, process.pid
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)


def start(client: Client, rpc_timeout: timedelta | None = None) -> Awaitable[object]:
    return client.start_workflow(
        "Nothing", id=f"d-{uuid.uuid4().hex}", task_queue=QUEUE, rpc_timeout=rpc_timeout
    )


async def timed(call: Awaitable[object]) -> tuple[float, str]:
    began = time.monotonic()
    try:
        await call
        outcome = "ok"
    except ApiError as error:
        outcome = f"{error.status}"
    except Exception as error:  # noqa: BLE001 - the bench reports whatever ends the call
        outcome = type(error).__name__
    return time.monotonic() - began, outcome


async def clients(address: str) -> tuple[Client, Client]:
    probed = await Client.connect(address)
    configured = await Client.connect(address, retry_config=CLIENT_RETRY)
    return probed, configured


async def down_case(kind: str, runs: int) -> dict[str, list[tuple[float, str]]]:
    results: dict[str, list[tuple[float, str]]] = {"probe": [], "client config": []}
    for _ in range(runs):
        with TemporaryDirectory() as directory:
            async with server(Path(directory)) as (address, pid):
                probed, configured = await clients(address)
                await start(probed)  # both connections are warm before the server goes
                await start(configured)
                os.kill(pid, signal.SIGKILL if kind == "killed" else signal.SIGSTOP)
                await asyncio.sleep(0.2)
                deadline = GatewayDeadline(probed)
                results["probe"].append(await timed(deadline(start(probed))))
                results["client config"].append(await timed(start(configured, RPC_TIMEOUT)))
    return results


async def burst_case(size: int) -> dict[str, tuple[list[float], int]]:
    results: dict[str, tuple[list[float], int]] = {}
    with TemporaryDirectory() as directory:
        async with server(Path(directory)) as (address, _):
            probed, configured = await clients(address)
            deadline = GatewayDeadline(probed)
            ways: dict[str, Callable[[], Awaitable[object]]] = {
                "probe": lambda: deadline(start(probed)),
                "client config": lambda: start(configured, RPC_TIMEOUT),
            }
            for way, call in ways.items():
                outcomes = await asyncio.gather(*(timed(call()) for _ in range(size)))
                failed = sum(1 for _, outcome in outcomes if outcome != "ok")
                results[way] = ([seconds for seconds, _ in outcomes], failed)
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burst", type=int, default=300)
    args = parser.parse_args()
    for kind in ("killed", "hung"):
        for way, outcomes in (await down_case(kind, args.runs)).items():
            shown = ", ".join(f"{seconds:.2f} s ({outcome})" for seconds, outcome in outcomes)
            print(f"server {kind:6} | {way:13} | {shown}")
    for way, (seconds, failed) in (await burst_case(args.burst)).items():
        cells = p50_p95([s * 1000 for s in seconds], 0)
        print(f"live burst of {args.burst} | {way:13} | failed {failed} | p50 | p95 ms {cells}")


if __name__ == "__main__":
    asyncio.run(main())
