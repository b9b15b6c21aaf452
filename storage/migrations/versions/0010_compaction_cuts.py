"""Compactions looked up by the message they cover up to: a model step walks the active path
back from its leaf and stops at the first such message, so it needs to ask, per message,
whether a summary ends there.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_compactions_cut", "compactions", ["session_id", "up_to_message_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_compactions_cut", table_name="compactions")
