"""How a turn ends, decided once at the start of its finish: a stop recorded before that
decision wins, one that arrives after it is answered `already_finished`. And the history a
recovery boot plan chose, which every later model step of the turn is given.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("ending", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("boot_history", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("boot_history")
        batch.drop_column("ending")
