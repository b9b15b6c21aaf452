"""A workspace file's content may live in the blob directory: the row then names its blob.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workspace_files") as batch:
        batch.add_column(sa.Column("blob", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workspace_files") as batch:
        batch.drop_column("blob")
