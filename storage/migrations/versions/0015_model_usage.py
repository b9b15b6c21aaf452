"""Model usage: one row per model call's attempt, each tenant's tokens per day, and the
tenants' daily and monthly token budgets (tenant_policies).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("submission_id", sa.String(length=64), primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("chat_id", sa.String(length=200), nullable=True),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("reasoning_tokens", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
    )
    op.create_index("ix_model_usage_tenant_at", "model_usage", ["tenant_id", "at"])
    op.create_table(
        "tenant_usage_days",
        sa.Column("tenant_id", sa.String(length=200), primary_key=True),
        sa.Column("day", sa.String(length=10), primary_key=True),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
    )
    with op.batch_alter_table("tenant_policies") as batch:
        batch.add_column(sa.Column("daily_tokens", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("monthly_tokens", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenant_policies") as batch:
        batch.drop_column("monthly_tokens")
        batch.drop_column("daily_tokens")
    op.drop_table("tenant_usage_days")
    op.drop_index("ix_model_usage_tenant_at", table_name="model_usage")
    op.drop_table("model_usage")
