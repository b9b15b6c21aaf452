"""Storage hygiene: when a chunk log closed and when its chunks were pruned, and the indexes
that pruning and deleting a session look rows up by.

`chunk_logs.closed_at` is set with the terminal chunk; logs closed before this migration take
the time of their last chunk. `chunk_logs.pruned_at` is set when the reconciler deletes the
log's chunks after the retention period: the row stays, so a resume of that answer can say
why it has nothing to send.

Revision ID: 0007
Revises: 0005, 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = ("0005", "0006")
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chunk_logs") as batch:
        batch.add_column(sa.Column("closed_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("pruned_at", sa.Float, nullable=True))
    op.execute(
        "UPDATE chunk_logs SET closed_at = COALESCE((SELECT c.created_at FROM chunks c "
        "WHERE c.message_id = chunk_logs.message_id ORDER BY c.seq DESC LIMIT 1), 0) "
        "WHERE closed"
    )
    op.create_index("ix_chunk_logs_prunable", "chunk_logs", ["pruned_at", "closed_at"])
    op.create_index("ix_submissions_assistant_message_id", "submissions", ["assistant_message_id"])
    op.create_index("ix_incidents_session_id", "incidents", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_incidents_session_id", table_name="incidents")
    op.drop_index("ix_submissions_assistant_message_id", table_name="submissions")
    op.drop_index("ix_chunk_logs_prunable", table_name="chunk_logs")
    with op.batch_alter_table("chunk_logs") as batch:
        batch.drop_column("pruned_at")
        batch.drop_column("closed_at")
