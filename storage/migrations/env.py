"""Alembic environment: runs on the connection handed over by storage.migrate."""

from alembic import context
from sqlmodel import SQLModel

import storage.access_tables  # noqa: F401  (API keys, tenant policies, rate buckets)
import storage.fiber_tables  # noqa: F401  (durable fibers' tables)
import storage.schedule_tables  # noqa: F401  (scheduled prompts' tables)
import storage.tables  # noqa: F401  (registers the tables on SQLModel.metadata)
import storage.usage_tables  # noqa: F401  (model usage, tenant tokens per day)
import storage.workspace_tables  # noqa: F401  (session workspaces)

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
