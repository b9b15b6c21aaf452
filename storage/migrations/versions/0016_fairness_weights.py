"""A tenant's fairness weight (its share of a backlogged task queue), and the weight each
submission's turn was started with.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenant_policies") as batch:
        batch.add_column(sa.Column("fairness_weight", sa.Float(), nullable=True))
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("fairness_weight", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("fairness_weight")
    with op.batch_alter_table("tenant_policies") as batch:
        batch.drop_column("fairness_weight")
