"""Fenced chunk logs and a store-assigned FIFO position for submissions.

`chunk_logs` holds one row per assistant message: the next seq, whether the log is closed, and
the newest attempt of each writing activity (its fence). Every append locks that row, so
appends to one log are serialized, an older attempt's write after a newer attempt claimed the
log is refused, and nothing is appended after the terminal chunk.

`submissions.queue_seq` orders a session's queue by a counter kept on the session row
(`sessions.next_queue_seq`), not by a gateway's clock.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chunk_logs",
        sa.Column("message_id", sa.String(64), primary_key=True),
        sa.Column("next_seq", sa.Integer, nullable=False),
        sa.Column("closed", sa.Boolean, nullable=False),
        sa.Column("fences", sa.JSON, nullable=False),
    )
    op.execute(
        "INSERT INTO chunk_logs (message_id, next_seq, closed, fences) "
        "SELECT message_id, MAX(seq) + 1, false, '{}' FROM chunks GROUP BY message_id"
    )
    op.execute(
        "UPDATE chunk_logs SET closed = true WHERE message_id IN ("
        "SELECT assistant_message_id FROM submissions WHERE status NOT IN ('pending', 'running'))"
    )
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("next_queue_seq", sa.Integer, nullable=False, server_default="0")
        )
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("queue_seq", sa.Integer, nullable=False, server_default="0"))
    op.execute(
        "UPDATE submissions SET queue_seq = (SELECT COUNT(*) FROM submissions AS earlier "
        "WHERE earlier.session_id = submissions.session_id AND (earlier.created_at < "
        "submissions.created_at OR (earlier.created_at = submissions.created_at AND "
        "earlier.id <= submissions.id)))"
    )
    op.execute(
        "UPDATE sessions SET next_queue_seq = COALESCE((SELECT MAX(queue_seq) FROM submissions "
        "WHERE submissions.session_id = sessions.id), 0) + 1"
    )
    op.drop_index("ix_submission_queue", table_name="submissions")
    op.create_index("ix_submission_queue", "submissions", ["session_id", "status", "queue_seq"])


def downgrade() -> None:
    op.drop_index("ix_submission_queue", table_name="submissions")
    op.create_index("ix_submission_queue", "submissions", ["session_id", "status", "created_at"])
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("queue_seq")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("next_queue_seq")
    op.drop_table("chunk_logs")
