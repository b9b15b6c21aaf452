"""`perdure dev | worker | gateway | migrate`."""

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn

from gateway.app import create_app
from perdure.agents_registry import load_agents
from runtime.schedules import ensure_reconciler_schedule
from runtime.services import Services, open_services
from runtime.settings import Settings
from runtime.temporal_dev import DevServerConfig, dev_server
from runtime.worker import build_worker
from storage.migrate import migrate

log = logging.getLogger("perdure")


def _gateway_server(services: Services | None, settings: Settings) -> uvicorn.Server:
    app = create_app(services=services, settings=settings)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", access_log=False
    )
    return uvicorn.Server(config)


async def _until_stopped(*tasks: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Run until any task ends or SIGINT/SIGTERM; then stop the rest."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    running: list[asyncio.Task[Any]] = [asyncio.create_task(task()) for task in tasks]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*running, stopper], return_when=asyncio.FIRST_COMPLETED)
    for task in [*running, stopper]:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for task in done:
        failure = None if task is stopper or task.cancelled() else task.exception()
        if failure is not None:
            raise failure


async def _dev(settings: Settings) -> None:
    async with dev_server(
        address=settings.temporal_address,
        ui_port=settings.ui_port,
        db_file=settings.data_dir / "temporal.db",
        namespace=settings.temporal_namespace,
        config=DevServerConfig.load(settings.temporal_dev_config),
    ):
        async with open_services(settings) as services:
            services.eager_start = True
            services.bus.reliable = True  # the worker publishes on this very bus
            worker = build_worker(services, load_agents(settings.agents))
            await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
            server = _gateway_server(services, settings)
            print(f"Perdure is running (model: {settings.model})")
            print(f"  chat API     http://{settings.host}:{settings.port}/api/chat")
            print(f"  API docs     http://{settings.host}:{settings.port}/docs")
            print(f"  Temporal UI  http://127.0.0.1:{settings.ui_port}")
            print(f"  store        {settings.resolved_database_url()}")
            await _until_stopped(worker.run, server.serve)


async def _worker(settings: Settings) -> None:
    async with open_services(settings, listen=False) as services:
        worker = build_worker(services, load_agents(settings.agents))
        await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
        print(f"Perdure worker on {settings.temporal_address} (model: {settings.model})")
        await _until_stopped(worker.run)


async def _gateway(settings: Settings) -> None:
    server = _gateway_server(None, settings)
    print(f"Perdure gateway on http://{settings.host}:{settings.port}")
    await _until_stopped(server.serve)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="perdure", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("dev", help="Temporal dev server, worker and gateway in one process")
    commands.add_parser("worker", help="run a worker (workflows and activities)")
    commands.add_parser("gateway", help="run the HTTP gateway")
    commands.add_parser("migrate", help="bring the store's schema up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings()
    if args.command == "migrate":
        migrate(settings.resolved_database_url())
        print("schema is up to date")
        return
    run = {"dev": _dev, "worker": _worker, "gateway": _gateway}[args.command]
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
