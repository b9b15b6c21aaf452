"""Tool calls a parked turn waits on (approvals, client-side tool outputs), sub-agent
sessions linked to the tool call of their parent, the client tools a request declares, what
the submissions API records with a submission (metadata, earlier messages, a cancel, a branch),
and compaction summaries.

One `tool_waits` row per call the turn parked on, made in the same transaction as the park's
`finish` chunk, so a row can be answered only while its turn really waits for it.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_waits",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("tenant_id", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("submission_id", sa.String(64), nullable=False),
        sa.Column("tool_call_id", sa.String(200), nullable=False),
        sa.Column("tool_name", sa.String(200), nullable=False),
        sa.Column("input", sa.JSON, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("approved", sa.Boolean, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("output", sa.JSON, nullable=True),
        sa.Column("error_text", sa.Text, nullable=True),
        sa.Column("requested_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("answered_at", sa.Float, nullable=True),
        sa.UniqueConstraint("submission_id", "tool_call_id", name="uq_tool_wait_call"),
    )
    op.create_index("ix_tool_waits_session", "tool_waits", ["session_id", "status"])
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("parent_session_id", sa.String(200), nullable=True))
        batch.add_column(sa.Column("parent_tool_call_id", sa.String(200), nullable=True))
    op.create_index("ix_sessions_parent", "sessions", ["parent_session_id"])
    op.create_table(
        "compactions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("up_to_message_id", sa.String(200), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("tokens_before", sa.Integer, nullable=False),
        sa.Column("tokens_after", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_compactions_session", "compactions", ["session_id"])
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("client_tools", sa.JSON, nullable=True))
        batch.add_column(sa.Column("meta", sa.JSON, nullable=True))
        batch.add_column(sa.Column("prior_messages", sa.JSON, nullable=True))
        batch.add_column(sa.Column("cancel_requested_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("rolled_back", sa.Boolean, nullable=True))
        batch.add_column(sa.Column("regenerates", sa.Boolean, nullable=True))
        batch.add_column(sa.Column("edit_of", sa.String(200), nullable=True))
        batch.add_column(sa.Column("branch_point", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_index("ix_compactions_session", table_name="compactions")
    op.drop_table("compactions")
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("branch_point")
        batch.drop_column("edit_of")
        batch.drop_column("regenerates")
        batch.drop_column("rolled_back")
        batch.drop_column("cancel_requested_at")
        batch.drop_column("prior_messages")
        batch.drop_column("meta")
        batch.drop_column("client_tools")
    op.drop_index("ix_sessions_parent", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("parent_tool_call_id")
        batch.drop_column("parent_session_id")
    op.drop_index("ix_tool_waits_session", table_name="tool_waits")
    op.drop_table("tool_waits")
