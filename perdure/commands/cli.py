"""`perdure`: run Perdure (`dev`, `worker`, `gateway`, `migrate`, `temporal-setup`), or talk
to a running gateway (`chat`, `sessions`, `open`)."""

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import uvicorn

from perdure.agents_registry import AgentRegistry, load_agents
from perdure.commands.access_cli import ACCESS_COMMANDS, add_access_commands, run_access_command
from perdure.commands.client_cli import CLIENT_COMMANDS, add_client_commands, run_client_command
from perdure.commands.configuration import configured
from perdure.commands.reconcile import RUN_TIMEOUT, ReconcileFailed, reconcile_now, run_seconds
from perdure.commands.temporal_setup import temporal_setup
from perdure.runtime.health import dependency_checks
from perdure.runtime.loop_lag import watching_loop_lag
from perdure.runtime.prompt_schedules import sync_declared_schedules
from perdure.runtime.reconciler_schedule import ensure_reconciler_schedule
from perdure.runtime.services import Services, open_services
from perdure.runtime.settings import Settings
from perdure.runtime.temporal_connection import TemporalConnectionConfigError, TemporalUnreachable
from perdure.runtime.temporal_dev import DevServerConfig, dev_server
from perdure.runtime.temporal_setup import TemporalSetupNeeded
from perdure.runtime.worker_health import WorkerHealth
from perdure.telemetry.metrics_server import serve_metrics
from perdure.telemetry.tracing import start_tracing, stop_tracing
from storage.migrate import migrate

if TYPE_CHECKING:
    # Each command imports what only it runs: the worker (and with it the provider SDKs) for
    # the commands that run one, the gateway's app for those that serve it, the relay's for
    # the relay. A worker never needs the web app nor a gateway the SDKs, and each costs a
    # second or more of CPU at every start (`tests/unit/test_cli_imports.py`).
    from temporalio.worker import Worker

    from perdure.runtime.worker import ActivityTracker

log = logging.getLogger("perdure")

GATEWAY_SHUTDOWN_GRACE = 10
"""Seconds a stopping gateway gives its open streams; then they are cut, and their clients
resume through another gateway with `Last-Event-ID` (the log holds everything)."""


def _gateway_server(services: Services | None, settings: Settings) -> uvicorn.Server:
    from gateway.app import create_app

    app = create_app(services=services, settings=settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GATEWAY_SHUTDOWN_GRACE,
        # JSON logs: uvicorn's records go through the root logger's JSON handler.
        log_config=None if settings.log_format == "json" else uvicorn.config.LOGGING_CONFIG,
    )
    return uvicorn.Server(config)


def _listening_socket(host: str, port: int, *, variable: str) -> socket.socket:
    """A server's socket, bound before anything else starts: a port in use stops the command
    with one line, and nothing started meanwhile (the dev server's own ports, taken from the
    same ephemeral range a free port comes from) can take it first. Port 0: any free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on accepted
    # sockets that say they are TCP. With it on, a response's body waited for the client's
    # delayed ACK of its headers: 40 ms on every small answer of a kept-alive connection.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        raise SystemExit(
            f"perdure: cannot listen on {host}:{port} ({variable}): {error.strerror or error}"
        ) from None
    return listening


def _gateway_socket(settings: Settings) -> socket.socket:
    return _listening_socket(settings.host, settings.port, variable="PERDURE_PORT")


@dataclass(frozen=True)
class _Service:
    """Something a command runs until it is told to stop."""

    run: Callable[[], Coroutine[Any, Any, Any]]
    stop: Callable[[], Coroutine[Any, Any, Any]]
    """Ask it to end gracefully; `run` returns when it has."""
    force: Callable[[], None] = lambda: None
    """Ask it to end at once (a second signal), still through its own shutdown."""


SAME_SIGNAL_WINDOW = 1.0
"""Signals this close together are one request to stop: a process manager signals the whole
process group, and `make run` forwards the same signal to Perdure a moment later."""
FORCED_STOP_GRACE = 3.0
"""After a forced stop, how long services get to run their own quick shutdown before their
tasks are cancelled."""


async def _until_stopped(*services: _Service) -> None:
    """Run until any service ends or SIGINT/SIGTERM; then stop the others gracefully. A second
    signal while stopping (not the same one delivered twice) forces the stop."""
    stop, force = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    first_signal_at: float | None = None

    def on_signal() -> None:
        nonlocal first_signal_at
        if first_signal_at is None:
            first_signal_at = time.monotonic()
            stop.set()
        elif time.monotonic() - first_signal_at >= SAME_SIGNAL_WINDOW:
            force.set()

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
        for service in services:
            service.force()
        await asyncio.wait(running, timeout=FORCED_STOP_GRACE)
    for task in [*running, *stopping, forcer]:
        task.cancel()
    outcomes = await asyncio.gather(*running, *stopping, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome


def _serving(server: uvicorn.Server, listening: socket.socket | None = None) -> _Service:
    async def run() -> None:
        await server.serve(sockets=[listening] if listening is not None else None)

    async def stop() -> None:
        server.should_exit = True

    def force() -> None:
        # uvicorn's own forced exit: open streams are cut, the app's lifespan still ends
        # (cancelling `serve` instead printed Starlette's lifespan CancelledError).
        server.force_exit = True

    return _Service(run=run, stop=stop, force=force)


def _working(
    worker: "Worker", tracker: "ActivityTracker", services: Services, health: WorkerHealth
) -> _Service:
    grace = services.settings.worker_shutdown_grace

    async def stop() -> None:
        health.stopping()
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
        health.polling(lambda: dependency_checks(services.db, services.client))
        try:
            async with watching_loop_lag():
                await worker.run()
        finally:
            health.stopping()

    return _Service(run=run, stop=stop)


def served_agents(settings: Settings) -> AgentRegistry:
    """The agents to serve, each checked against what its model accepts; a refusal stops the
    process with one line naming the agent, its model and every option refused."""
    agents = load_agents(settings.agents)
    try:
        agents.check_models(settings.model, settings.model_families)
    except ValueError as error:
        raise SystemExit(f"perdure: {error}") from None
    return agents


async def _dev(settings: Settings, health: WorkerHealth) -> None:
    from perdure.runtime.relay_service import dev_relay_secret, relay_config, relay_server

    listening = _gateway_socket(settings)
    relay: _Service | None = None
    if settings.dev_relay and settings.relay_url is None:
        # The worker of this process streams through a relay of this process (docs/relay.md).
        relay_socket = _listening_socket("127.0.0.1", 0, variable="the in-process relay")
        port = relay_socket.getsockname()[1]
        secret = dev_relay_secret()
        server = relay_server(relay_config(settings, secret), host="127.0.0.1", port=port)
        relay = _serving(server, relay_socket)
        settings = settings.model_copy(
            update={"relay_url": f"http://127.0.0.1:{port}", "relay_secret": secret}
        )
    async with dev_server(
        address=settings.temporal_address,
        ui_port=settings.ui_port,
        db_file=settings.data_dir / "temporal.db",
        namespace=settings.temporal_namespace,
        config=DevServerConfig.load(settings.temporal_dev_config),
    ):

        def banner() -> None:
            print(f"Perdure is running (model: {settings.model})")
            print(f"  chat page    http://{settings.host}:{settings.port}/")
            print(f"  chat API     http://{settings.host}:{settings.port}/api/chat")
            print(f"  API docs     http://{settings.host}:{settings.port}/docs")
            print(f"  Temporal UI  http://127.0.0.1:{settings.ui_port}")
            print(f"  store        {settings.resolved_database_url()}")
            if relay is not None:
                print(f"  relay        {settings.relay_url} (in-process)")
            sys.stdout.flush()  # at once in a log or a pipe, not when a buffer fills

        await _node(settings, banner, listening, health, alone=True, relay=relay)


async def _serve(settings: Settings, health: WorkerHealth) -> None:
    listening = _gateway_socket(settings)

    def banner() -> None:
        relayed = f", relay {settings.relay_url}" if settings.relay_url else ""
        print(
            f"Perdure node (gateway and worker) on http://{settings.host}:{settings.port}, "
            f"Temporal {settings.temporal_address}{relayed} (model: {settings.model})",
            flush=True,
        )

    await _node(settings, banner, listening, health, alone=False)


async def _node(
    settings: Settings,
    banner: Callable[[], None],
    listening: socket.socket,
    health: WorkerHealth,
    *,
    alone: bool,
    relay: _Service | None = None,
) -> None:
    """A gateway and a worker in one process, on one Temporal client: a turn's workflow starts
    eagerly on this worker, and its chunks wake this gateway's streams without a round trip
    through the store. `alone`: no other process writes to this store (`perdure dev`), so
    this process's own appends are every append there is."""
    async with open_services(settings) as services:
        services.eager_start = True
        if alone:
            services.bus.reliable = True  # the worker publishes on this very bus
        from perdure.runtime.head_start import start_heads
        from perdure.runtime.worker import ActivityTracker, build_worker

        tracker = ActivityTracker()
        agents = served_agents(settings)
        worker = build_worker(services, agents, tracker)
        start_heads(services, agents)
        await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
        await sync_declared_schedules(services, agents)
        server = _gateway_server(services, settings)
        banner()
        await _until_stopped(
            _working(worker, tracker, services, health),
            _serving(server, listening),
            *([relay] if relay is not None else []),
        )


async def _worker(settings: Settings, health: WorkerHealth) -> None:
    async with open_services(settings, listen=False) as services:
        from perdure.runtime.worker import ActivityTracker, build_worker

        tracker = ActivityTracker()
        agents = served_agents(settings)
        worker = build_worker(services, agents, tracker)
        await ensure_reconciler_schedule(services.client, task_queue=settings.task_queue)
        await sync_declared_schedules(services, agents)
        print(f"Perdure worker on {settings.temporal_address} (model: {settings.model})")
        await _until_stopped(_working(worker, tracker, services, health))


async def _relay(settings: Settings) -> None:
    from perdure.runtime.relay_service import RelayNotConfigured, relay_config, relay_server

    try:
        config = relay_config(settings)
    except RelayNotConfigured as error:
        raise SystemExit(f"perdure: {error}") from None
    listening = _listening_socket(
        settings.relay_host, settings.relay_port, variable="PERDURE_RELAY_PORT"
    )
    server = relay_server(config, host=settings.relay_host, port=settings.relay_port)
    print(f"Perdure provider relay on http://{settings.relay_host}:{settings.relay_port}")
    await _until_stopped(_serving(server, listening))


async def _gateway(settings: Settings) -> None:
    listening = _gateway_socket(settings)
    # Opened before serving, so a Temporal that is not set up stops it with one clear line.
    from perdure.runtime.head_start import head_start_config, start_heads

    async with open_services(settings) as services:
        if head_start_config(settings) is not None:
            # The gateway plans each turn's first request as the workers' steps will: it
            # needs their agents (PERDURE_AGENTS), never a provider key.
            start_heads(services, served_agents(settings))
        server = _gateway_server(services, settings)
        print(f"Perdure gateway on http://{settings.host}:{settings.port}")
        await _until_stopped(_serving(server, listening))


@contextlib.contextmanager
def _telemetry(settings: Settings, command: str) -> Iterator[WorkerHealth]:
    """Traces (when an OTLP endpoint is set) and, where a worker runs, its `/metrics` and
    `/healthz` on `PERDURE_METRICS_PORT` (when set), for as long as the command runs. Started
    before any Temporal client exists, so a port in use stops the command with one line."""
    health = WorkerHealth()
    metrics = None
    if settings.metrics_port is not None and command in ("dev", "serve", "worker"):
        token = settings.metrics_token
        try:
            metrics = serve_metrics(
                settings.host,
                settings.metrics_port,
                health=health.answer,
                token=token.get_secret_value() if token else None,
            )
        except OSError as error:
            raise SystemExit(
                f"perdure: cannot serve metrics on {settings.host}:{settings.metrics_port} "
                f"(PERDURE_METRICS_PORT): {error}"
            ) from None
    if settings.tracing_enabled:
        endpoint = settings.otlp_traces_endpoint or settings.otlp_endpoint or ""
        start_tracing(
            endpoint=endpoint,
            service_name=f"perdure-{command}",
            protocol=settings.otlp_traces_protocol_used,
        )
    try:
        yield health
    finally:
        stop_tracing()
        if metrics is not None:
            metrics.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="perdure", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("dev", help="Temporal dev server, worker and gateway in one process")
    commands.add_parser("worker", help="run a worker (workflows and activities)")
    commands.add_parser(
        "serve", help="run a node: a gateway and a worker in one process (docs/deploy.md)"
    )
    commands.add_parser("gateway", help="run the HTTP gateway")
    commands.add_parser(
        "relay", help="run the provider relay: model steps' provider streams outlive workers"
    )
    commands.add_parser("migrate", help="bring the store's schema up to date")
    commands.add_parser(
        "temporal-setup", help="register Perdure's search attributes in the Temporal namespace"
    )
    reconcile = commands.add_parser(
        "reconcile", help="run the reconciler once now and print what it did (a worker runs it)"
    )
    reconcile.add_argument(
        "--timeout",
        type=run_seconds,
        default=RUN_TIMEOUT.total_seconds(),
        help="seconds to wait for a worker to run it (default %(default)s)",
    )
    add_client_commands(commands)
    add_access_commands(commands)
    args = parser.parse_args(argv)
    if args.command in CLIENT_COMMANDS:  # clients of a gateway: no settings, no logging
        raise SystemExit(run_client_command(args))
    settings = configured()
    if args.command in ACCESS_COMMANDS:  # the store only, as `migrate`
        raise SystemExit(run_access_command(args, settings))
    if args.command == "migrate":
        logging.getLogger("alembic").setLevel(logging.INFO)  # asked for: show each step
        migrate(settings.resolved_database_url())
        print("schema is up to date")
        return
    try:
        if args.command == "temporal-setup":
            print(asyncio.run(temporal_setup(settings)))
        elif args.command == "reconcile":
            print(asyncio.run(reconcile_now(settings, within_seconds=args.timeout)))
        else:
            commands_run: dict[
                str, Callable[[Settings, WorkerHealth], Coroutine[Any, Any, None]]
            ] = {
                "dev": _dev,
                "serve": _serve,
                "worker": _worker,
                "gateway": lambda settings, _: _gateway(settings),
                "relay": lambda settings, _: _relay(settings),
            }
            run = commands_run[args.command]
            with _telemetry(settings, args.command) as health:
                asyncio.run(run(settings, health))
    except (
        TemporalSetupNeeded,
        TemporalConnectionConfigError,
        TemporalUnreachable,
        ReconcileFailed,
    ) as error:
        _leave(1, f"perdure: {error}")
    _leave(0)


def _leave(code: int, message: str = "") -> NoReturn:
    """Ends a command that held a Temporal client without interpreter teardown.

    The client's Rust threads can outlive the event loop and abort finalization with
    "PyGILState_Release: thread state … must be current" (temporalio/sdk-python#300), which
    turns a command that did its work into a crash with exit code -6.
    """
    if message:
        print(message, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
