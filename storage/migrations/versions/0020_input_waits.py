"""A tool call may wait more than once: for its approval, then for each question its MCP
server asks (`input` waits, one per round). A wait is one per call, kind and round.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_waits") as batch:
        batch.add_column(sa.Column("round", sa.Integer(), nullable=False, server_default="0"))
        batch.drop_constraint("uq_tool_wait_call", type_="unique")
        batch.create_unique_constraint(
            "uq_tool_wait_call_round", ["submission_id", "tool_call_id", "kind", "round"]
        )


def downgrade() -> None:
    # Code before this revision knows no `input` wait, and one call may have several.
    op.execute("DELETE FROM tool_waits WHERE kind = 'input'")
    with op.batch_alter_table("tool_waits") as batch:
        batch.drop_constraint("uq_tool_wait_call_round", type_="unique")
        batch.create_unique_constraint("uq_tool_wait_call", ["submission_id", "tool_call_id"])
        batch.drop_column("round")
