"""Shared fixtures: a real Temporal dev server, the fake provider, and Perdure stacks."""

import os
from collections.abc import AsyncIterator

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from perdure.domain.turn_labels import TURN_ATTRIBUTES
from perdure.runtime.temporal_dev import FAIRNESS_SETTING, temporal_binary
from perdure.testing.stack import Stack, running_stack
from tests.databases import database_url
from tests.fakeprovider_fixtures import (  # noqa: F401 - shared fixtures
    fake_provider,
    fake_provider_config,
)
from tests.served import STACK_AGENTS


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
        items[:] = kept


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


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
async def stack(
    request: pytest.FixtureRequest,
    temporal_env: WorkflowEnvironment,
    provider_env: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    directory = tmp_path_factory.mktemp(f"stack-{request.param}")
    with database_url(request.param, directory) as url:
        async with running_stack(
            client=temporal_env.client, database_url=url, data_dir=directory, agents=STACK_AGENTS
        ) as running:
            yield running
