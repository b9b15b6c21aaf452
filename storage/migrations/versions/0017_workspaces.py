"""Session workspaces: each session's files, its versions and totals, the changes tool
calls made (each once) and the versions turns saw.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workspaces",
        sa.Column("session_id", sa.String(length=200), primary_key=True),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("total_bytes", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "workspace_files",
        sa.Column("session_id", sa.String(length=200), primary_key=True),
        sa.Column("path", sa.String(length=512), primary_key=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "workspace_changes",
        sa.Column("session_id", sa.String(length=200), primary_key=True),
        sa.Column("change_id", sa.String(length=200), primary_key=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_table(
        "workspace_seen",
        sa.Column("submission_id", sa.String(length=64), primary_key=True),
        sa.Column("path", sa.String(length=512), primary_key=True),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workspace_seen")
    op.drop_table("workspace_changes")
    op.drop_table("workspace_files")
    op.drop_table("workspaces")
