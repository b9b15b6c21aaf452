"""Access control: API keys kept as hashes, per-tenant policies (allowed agents, rate limit),
and the per-tenant token buckets that rate-limit submissions across every gateway.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("tenant_id", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float, nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_index("ix_api_keys_key_hash", "api_keys", ["key_hash"], unique=True)
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.create_index("ix_api_keys_revoked_at", "api_keys", ["revoked_at"])
    op.create_table(
        "tenant_policies",
        sa.Column("tenant_id", sa.String(200), primary_key=True),
        sa.Column("allowed_agents", sa.JSON, nullable=True),
        sa.Column("rate_limit", sa.String(32), nullable=True),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "rate_buckets",
        sa.Column("tenant_id", sa.String(200), primary_key=True),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("refilled_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
    op.drop_table("tenant_policies")
    op.drop_index("ix_api_keys_revoked_at", table_name="api_keys")
    op.drop_index("ix_api_keys_tenant_id", table_name="api_keys")
    op.drop_index("ix_api_keys_key_hash", table_name="api_keys")
    op.drop_table("api_keys")
