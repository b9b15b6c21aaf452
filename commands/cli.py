"""`perdure dev | worker | gateway | migrate`."""

import argparse
import asyncio
import logging
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import uvicorn
from pydantic import ValidationError
from temporalio.worker import Worker

from gateway.app import create_app
from perdure.agents_registry import load_agents
from runtime.loop_lag import watching_loop_lag
from runtime.schedules import ensure_reconciler_schedule
from runtime.services import Services, open_services
from runtime.settings import Settings
from runtime.temporal_dev import DevServerConfig, dev_server
from storage.migrate import migrate

if TYPE_CHECKING:
    # The worker (and with it the provider SDKs) is imported only by the commands that run
    # one: a gateway never needs it, and importing it costs seconds.
    from runtime.worker import ActivityTracker

log = logging.getLogger("perdure")

GATEWAY_SHUTDOWN_GRACE = 10
"""Seconds a stopping gateway gives its open streams; then they are cut, and their clients
resume through another gateway with `Last-Event-ID` (the log holds everything)."""


def _gateway_server(services: Services | None, settings: Settings) -> uvicorn.Server:
    app = create_app(services=services, settings=settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GATEWAY_SHUTDOWN_GRACE,
    )
    return uvicorn.Server(config)


@dataclass(frozen=True)
class _Service:
    """Something a command runs until it is told to stop."""

    run: Callable[[], Coroutine[Any, Any, Any]]
    stop: Callable[[], Coroutine[Any, Any, Any]]
    """Ask it to end gracefully; `run` returns when it has."""


async def _until_stopped(*services: _Service) -> None:
    """Run until any service ends or SIGINT/SIGTERM; then stop the others gracefully. A second
    signal while stopping cancels whatever is still running."""
    stop, force = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        (force if stop.is_set() else stop).set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    running = [asyncio.create_task(service.run()) for service in services]
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([*running, stopper], return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    stopper.cancel()
    stopping = [
        asyncio.create_task(service.stop())
        for service, task in zip(services, running, strict=True)
        if not task.done()
    ]
    forcer = asyncio.create_task(force.wait())
    while not all(task.done() for task in running) and not forcer.done():
        await asyncio.wait([*running, forcer], return_when=asyncio.FIRST_COMPLETED)
    if forcer.done():
        log.warning("stopping at once (second signal)")
    for task in [*running, *stopping, forcer]:
        task.cancel()
    outcomes = await asyncio.gather(*running, *stopping, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


def _serving(server: uvicorn.Server) -> _Service:
    async def stop() -> None:
        server.should_exit = True

    return _Service(run=server.serve, stop=stop)


def _working(worker: Worker, tracker: "ActivityTracker", grace: float) -> _Service:
    async def stop() -> None:
        started = time.monotonic()
        log.info(
            "worker shutting down: polling stopped; %d running activities have up to %g s "
            "to finish (PERDURE_WORKER_SHUTDOWN_GRACE)",
            tracker.running,
            grace,
        )
        await worker.shutdown()
        log.info(
            "worker stopped after %.1f s; %d activities handed over to other workers",
            time.monotonic() - started,
            tracker.handed_over,
        )

    async def run() -> None:
        async with watching_loop_lag():
            await worker.run()

    return _Service(run=run, stop=stop)


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
            from runtime.worker import ActivityTracker, build_worker

            tracker = ActivityTracker()
            worker = build_worker(services, load_agents(settings.agents), tracker)
            await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
            server = _gateway_server(services, settings)
            print(f"Perdure is running (model: {settings.model})")
            print(f"  chat API     http://{settings.host}:{settings.port}/api/chat")
            print(f"  API docs     http://{settings.host}:{settings.port}/docs")
            print(f"  Temporal UI  http://127.0.0.1:{settings.ui_port}")
            print(f"  store        {settings.resolved_database_url()}")
            await _until_stopped(
                _working(worker, tracker, settings.worker_shutdown_grace), _serving(server)
            )


async def _worker(settings: Settings) -> None:
    async with open_services(settings, listen=False) as services:
        from runtime.worker import ActivityTracker, build_worker

        tracker = ActivityTracker()
        worker = build_worker(services, load_agents(settings.agents), tracker)
        await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
        print(f"Perdure worker on {settings.temporal_address} (model: {settings.model})")
        await _until_stopped(_working(worker, tracker, settings.worker_shutdown_grace))


async def _gateway(settings: Settings) -> None:
    server = _gateway_server(None, settings)
    print(f"Perdure gateway on http://{settings.host}:{settings.port}")
    await _until_stopped(_serving(server))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="perdure", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("dev", help="Temporal dev server, worker and gateway in one process")
    commands.add_parser("worker", help="run a worker (workflows and activities)")
    commands.add_parser("gateway", help="run the HTTP gateway")
    commands.add_parser("migrate", help="bring the store's schema up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: "
            f"{problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors(include_url=False, include_input=False)
        )
        raise SystemExit(f"perdure: invalid configuration: {problems}") from None
    if args.command == "migrate":
        migrate(settings.resolved_database_url())
        print("schema is up to date")
        return
    run = {"dev": _dev, "worker": _worker, "gateway": _gateway}[args.command]
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
