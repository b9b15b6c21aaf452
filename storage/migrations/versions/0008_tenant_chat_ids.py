"""Chat ids per tenant: `sessions.chat_id` is the id the client uses, unique per tenant;
`sessions.id` stays the storage key every child table refers to.

Existing sessions keep their id as their key and take it as their chat id; new ones are keyed
by `storage.session_keys.session_key(tenant, chat id)`. A downgrade drops the chat ids: sessions
created since are then known by their keys only.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("chat_id", sa.String(200), nullable=True))
    op.execute("UPDATE sessions SET chat_id = id")
    with op.batch_alter_table("sessions") as batch:
        batch.alter_column("chat_id", existing_type=sa.String(200), nullable=False)
        batch.create_unique_constraint("uq_session_chat", ["tenant_id", "chat_id"])


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_constraint("uq_session_chat", type_="unique")
        batch.drop_column("chat_id")
