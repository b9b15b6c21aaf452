"""Temporal's own floor for a burst of turns: the shape of a turn with nothing of Perdure in it.

    .venv/bin/python -m bench.temporal_floor [--chats 1,150] [--runs 3] [--local-finish]
        [--stream-seconds S] [--unsandboxed] [--dynamic KEY=JSON ...] [--pragma NAME=VALUE ...]

A Temporal dev server as Perdure's dev arrangement starts it (temporal-dev.yml), a worker in a
process of its own (like `perdure worker`) and this process as the client (like `perdure
gateway`). Each "turn" is a workflow that runs one activity (the model step: it stamps
`time.monotonic()` when it starts, then with `--stream-seconds` lasts that long, heartbeating
every second from 1 s in as Perdure's steps do) and then a second one (the finish; a local
activity with `--local-finish`, as Perdure's is). N workflows are started at the same instant;
per burst this reports start call → first activity running (the floor under any time to first
token a Temporal design can give), start call → workflow completed, the steps Temporal retried
(heartbeats that reached it too late), and the CPU seconds of the server, the worker and this
process. Perdure's own figures (`bench.load`, `bench.ttft_breakdown`) read against it; the
other flags try the server's and the SDK's knobs.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

from temporalio.client import Client

from bench._support import REPO, CpuMeter, p50_p95
from bench.floor_turn import QUEUE, FloorTurn
from perdure.runtime.temporal_dev import DevServerConfig, dev_server
from perdure.testing.stack import free_port


async def burst(
    client: Client, chats: int, local_finish: bool, stream_seconds: float
) -> tuple[list[float], list[float], int]:
    async def one() -> tuple[float, float]:
        posted = time.monotonic()
        handle = await client.start_workflow(
            FloorTurn.run,
            args=[local_finish, stream_seconds],
            id=f"floor-{uuid.uuid4().hex}",
            task_queue=QUEUE,
        )
        started: float = await handle.result()
        if started < 0:
            retried.append(handle.id)
        return (abs(started) - posted) * 1000, (time.monotonic() - posted) * 1000

    retried: list[str] = []
    results = await asyncio.gather(*(one() for _ in range(chats)))
    return [first for first, _ in results], [done for _, done in results], len(retried)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", default="1,150", help="comma-separated burst sizes")
    parser.add_argument("--runs", type=int, default=3, help="bursts per size")
    parser.add_argument("--unsandboxed", action="store_true", help="workflows outside the sandbox")
    parser.add_argument(
        "--local-finish", action="store_true", help="the finish as a local activity"
    )
    parser.add_argument(
        "--stream-seconds",
        type=float,
        default=0.0,
        help="how long the step lasts, heartbeating every second like a streaming model step",
    )
    parser.add_argument(
        "--dynamic",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a dynamic config value for the server, on top of temporal-dev.yml's",
    )
    parser.add_argument(
        "--pragma",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an SQLite pragma for the server, on top of temporal-dev.yml's",
    )
    args = parser.parse_args()
    address = f"127.0.0.1:{free_port()}"
    with TemporaryDirectory() as tmp:
        config = DevServerConfig.load(REPO / "temporal-dev.yml")
        for pair in args.dynamic:
            key, _, value = pair.partition("=")
            config.dynamic_config[key] = json.loads(value)
        for pair in args.pragma:
            key, _, value = pair.partition("=")
            config.sqlite_pragmas[key] = value
        async with dev_server(
            address=address,
            ui_port=None,
            db_file=Path(tmp) / "temporal.db",
            namespace="default",
            config=config,
        ) as server:
            assert isinstance(server, subprocess.Popen)
            worker = subprocess.Popen(
                [sys.executable, "-m", "bench.floor_turn", address]
                + (["--unsandboxed"] if args.unsandboxed else []),
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            try:
                client = await Client.connect(address)
                await burst(client, 1, args.local_finish, 0.0)  # the worker polls and imports
                print(
                    "| turns at once | start → activity running p50 / p95 (ms) "
                    "| start → completed p50 / p95 (ms) | steps retried | CPU-s server / worker / client |"
                )
                print("|---|---|---|---|---|")
                for chats in [int(n) for n in args.chats.split(",")]:
                    for _ in range(args.runs):
                        meter = CpuMeter({"server": server.pid, "worker": worker.pid})
                        meter.start()
                        first, done, retried = await burst(
                            client, chats, args.local_finish, args.stream_seconds
                        )
                        meter.stop()
                        cpu = meter.spent
                        print(
                            f"| {chats} | {p50_p95(first, 1)} | {p50_p95(done, 1)} | {retried} "
                            f"| {cpu['server']:.2f} / {cpu['worker']:.2f} / "
                            f"{cpu['load generator (this process)']:.2f} |",
                            flush=True,
                        )
            finally:
                worker.terminate()
                worker.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
