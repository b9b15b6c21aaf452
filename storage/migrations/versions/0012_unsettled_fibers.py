"""An index for the reconciler's sweep of fibers no workflow serves: by status and age, across
tenants (the tenant-first index cannot serve it).

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_fibers_status_created", "fibers", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_fibers_status_created", table_name="fibers")
