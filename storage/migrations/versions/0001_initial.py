"""Initial schema: sessions, messages (tree), submissions, chunk log, events.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Over 60 lines: one statement per table of the first schema. An applied migration is
    # history and stays as it ran.
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("tenant_id", sa.String(200), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("leaf_message_id", sa.String(200)),
        sa.Column("running_submission_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_sessions_tenant_id", "sessions", ["tenant_id", "updated_at"])
    op.create_table(
        "messages",
        sa.Column("session_id", sa.String(200), primary_key=True),
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("parent_id", sa.String(200)),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("parts", sa.JSON, nullable=False),
        sa.Column("meta", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("submission_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("tenant_id", sa.String(200), nullable=False),
        sa.Column("idempotency_key", sa.String(300), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("agent", sa.String(200), nullable=False),
        sa.Column("user_message", sa.JSON, nullable=False),
        sa.Column("user_message_id", sa.String(200), nullable=False),
        sa.Column("assistant_message_id", sa.String(64), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("completed_at", sa.Float),
        sa.UniqueConstraint("session_id", "idempotency_key", name="uq_submission_key"),
    )
    op.create_index("ix_submission_queue", "submissions", ["session_id", "status", "created_at"])
    op.create_table(
        "chunks",
        sa.Column("message_id", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("submission_id", sa.String(64)),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_events_session_id", "events", ["session_id", "id"])


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("chunks")
    op.drop_table("submissions")
    op.drop_table("messages")
    op.drop_table("sessions")
