"""Recovery: incidents, the turn's stash, the provider cursor of a resumable response.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("submission_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("stash", sa.JSON))
        batch.add_column(sa.Column("provider_cursor", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("provider_cursor")
        batch.drop_column("stash")
    op.drop_table("incidents")
