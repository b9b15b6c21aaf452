"""Scheduled prompts, and the agents each task queue's workers serve.

Revision ID: 0006
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("tenant_id", sa.String(200), primary_key=True),
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("last_occurrence", sa.String(64), nullable=True),
        sa.Column("last_submission_id", sa.String(64), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
    )
    op.create_table(
        "served_agents",
        sa.Column("task_queue", sa.String(200), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("seen_at", sa.Float, nullable=False),
        sa.Column("concurrency", sa.String(16), nullable=False, server_default="queue"),
    )


def downgrade() -> None:
    op.drop_table("served_agents")
    op.drop_table("schedules")
