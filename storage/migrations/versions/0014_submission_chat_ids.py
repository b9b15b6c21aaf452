"""A submission keeps its session's chat id (the id its client knows): starting or signalling
its turn (whose search attributes carry the chat id) needs no read of the session.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("chat_id", sa.String(length=200), nullable=True))
    op.execute(
        "UPDATE submissions SET chat_id = "
        "(SELECT sessions.chat_id FROM sessions WHERE sessions.id = submissions.session_id)"
    )


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("chat_id")
