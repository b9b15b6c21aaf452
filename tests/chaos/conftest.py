"""What the chaos specifications share."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from perdure.testing.cluster import Cluster, running_cluster
from perdure.testing.databases import MigratedTemplates
from perdure.testing.fakeprovider.server import FakeProvider
from perdure.testing.process_spawner import ProcessSpawner
from tests.databases import migrated_database_url
from tests.served import CLUSTER


@pytest.fixture
async def postgres_cluster(
    tmp_path: Path,
    fake_provider: FakeProvider,
    store_templates: MigratedTemplates,
    spawner: ProcessSpawner,
) -> AsyncIterator[Cluster]:
    """Processes on one PostgreSQL store, the scale-out store."""
    with migrated_database_url(store_templates, "postgres", tmp_path) as url:
        async with running_cluster(tmp_path, fake_provider, url, CLUSTER, spawner) as running:
            yield running
