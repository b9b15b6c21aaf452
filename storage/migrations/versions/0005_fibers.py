"""Durable fibers: the `fibers` ledger and the `fiber_kinds` the workers serve.

A fiber's idempotency key is unique per tenant (NULL keys never collide), so the same key
returns the same fiber. `fiber_kinds` is written by every worker at start: the gateway checks
a start against it, since it never loads agent code.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fibers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(200), nullable=False),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON, nullable=True),
        sa.Column("snapshot", sa.JSON, nullable=True),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("completed_at", sa.Float, nullable=True),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_fiber_key"),
    )
    op.create_index("ix_fibers_tenant_status", "fibers", ["tenant_id", "status", "created_at"])
    op.create_table(
        "fiber_kinds",
        sa.Column("task_queue", sa.String(200), primary_key=True),
        sa.Column("agent", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("max_age_seconds", sa.Float, nullable=False),
        sa.Column("max_run_seconds", sa.Float, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("hook_timeout_seconds", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fiber_kinds")
    op.drop_index("ix_fibers_tenant_status", table_name="fibers")
    op.drop_table("fibers")
