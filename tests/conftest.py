"""Shared fixtures: a real Temporal dev server, the fake provider, and Perdure stacks."""

import contextlib
import functools
import os
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx._transports.default as httpx_transports
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from perdure.domain.turn_labels import TURN_ATTRIBUTES
from perdure.runtime.temporal_dev import FAIRNESS_SETTING, temporal_binary
from perdure.testing.cluster import Cluster, Served, running_cluster
from perdure.testing.databases import MigratedTemplates
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.process_spawner import ProcessSpawner, process_spawner
from perdure.testing.stack import Stack, running_stack
from tests.databases import database_url, migrated_database_url
from tests.fakeprovider_fixtures import (  # noqa: F401 - shared fixtures
    fake_provider,
    fake_provider_config,
)
from tests.served import CLUSTER, STACK_AGENTS

_build_ssl_context = httpx_transports.create_ssl_context


@functools.cache
def _default_ssl_context(trust_env: bool) -> ssl.SSLContext:
    return _build_ssl_context(verify=True, cert=None, trust_env=trust_env)


def _ssl_context_built_once(
    verify: ssl.SSLContext | str | bool = True, cert: object = None, trust_env: bool = True
) -> ssl.SSLContext:
    """httpx builds an SSL context for every client it opens, loading certifi's CA bundle: about
    30 ms of CPU, and the suite opens thousands of clients (a tenth of its CPU). The default
    context never changes, so the suite's clients share one; any other settings are built as
    httpx builds them."""
    if verify is True and cert is None:
        return _default_ssl_context(trust_env)
    return _build_ssl_context(verify=verify, cert=cert, trust_env=trust_env)  # type: ignore[arg-type]


httpx_transports.create_ssl_context = _ssl_context_built_once  # type: ignore[assignment]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A `store_agnostic` test runs on SQLite only: what it specifies (hook time limits, a
    fiber's age) takes no store-specific path, and running it twice would only cost time."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and "postgres" in callspec.params.values()
        (dropped if on_postgres and item.get_closest_marker("store_agnostic") else kept).append(
            item
        )
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # The long specs first: a pytest-xdist worker that starts one near the end would run on
    # alone after the others have finished. Started first, they leave the short ones to share
    # out at the end.
    items[:] = sorted(kept, key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture
def served() -> Served:
    """What a cluster's workers serve (a module's own fixture can say otherwise)."""
    return CLUSTER


@pytest.fixture(params=["sqlite", "postgres"])
async def cluster(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fake_provider: FakeProvider,  # noqa: F811
    store_templates: MigratedTemplates,
    spawner: ProcessSpawner,
    served: Served,
) -> AsyncIterator[Cluster]:
    """Real processes on one store, of each kind: the embedded one and the scale-out one (the
    chaos specs', and a few in the first lane whose faults no machine's load can stretch)."""
    with migrated_database_url(store_templates, request.param, tmp_path) as url:
        async with running_cluster(tmp_path, fake_provider, url, served, spawner) as running:
            yield running


@pytest.fixture(scope="session")
def store_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MigratedTemplates]:
    """Migrated stores to copy (`tests.databases.migrated_database_url`)."""
    templates = MigratedTemplates(tmp_path_factory.mktemp("store-templates"))
    try:
        yield templates
    finally:
        templates.close()


@pytest.fixture(scope="session")
def spawner() -> Iterator[ProcessSpawner]:
    """Starts `perdure` processes without importing the server in each (each start's imports
    cost two to five seconds of CPU): the chaos clusters' processes, and the specs of commands
    that run to their end. Started by the first spec that asks, in each pytest process."""
    with process_spawner() as started:
        yield started


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
        search_attributes=TURN_ATTRIBUTES,
        # As `perdure dev` starts it (temporal-dev.yml).
        dev_server_extra_args=["--dynamic-config-value", f"{FAIRNESS_SETTING}=true"],
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def provider_env(fake_provider) -> None:  # noqa: F811
    os.environ["OPENAI_API_KEY"] = "test-key"
    os.environ["OPENAI_BASE_URL"] = fake_provider.openai_base_url
    os.environ["ANTHROPIC_API_KEY"] = "test-key"
    os.environ["ANTHROPIC_BASE_URL"] = fake_provider.anthropic_base_url


@contextlib.asynccontextmanager
async def _session_stack(
    store: str, temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    directory = tmp_path_factory.mktemp(f"stack-{store}")
    with database_url(store, directory) as url:
        async with running_stack(
            client=temporal_env.client, database_url=url, data_dir=directory, agents=STACK_AGENTS
        ) as running:
            yield running


@pytest.fixture(scope="session")
async def sqlite_stack(
    temporal_env: WorkflowEnvironment,
    provider_env: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    async with _session_stack("sqlite", temporal_env, tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="session")
async def postgres_stack(
    temporal_env: WorkflowEnvironment,
    provider_env: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    async with _session_stack("postgres", temporal_env, tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def stack(request: pytest.FixtureRequest) -> Stack:
    """The stack on each store (a spec that needs both at once asks for both by name)."""
    running: Stack = request.getfixturevalue(f"{request.param}_stack")
    return running
