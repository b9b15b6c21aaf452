"""Concurrency strategies `merge` and `debounce`: when a debounced turn may start, which
submission took a merged one's messages over, and each served agent's debounce period.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("not_before", sa.Float, nullable=True))
        batch.add_column(sa.Column("merged_into", sa.String(64), nullable=True))
    with op.batch_alter_table("served_agents") as batch:
        batch.add_column(sa.Column("debounce_ms", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("served_agents") as batch:
        batch.drop_column("debounce_ms")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("merged_into")
        batch.drop_column("not_before")
