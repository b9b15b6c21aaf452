"""Tables of session workspaces (migration 0017): each session's files, kept in the store."""

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, LargeBinary
from sqlmodel import Field, SQLModel


class WorkspaceRow(SQLModel, table=True):
    """A session's workspace: its version counts every change, its totals bound it."""

    __tablename__ = "workspaces"

    session_id: str = Field(primary_key=True, max_length=200)
    tenant_id: str = Field(max_length=200)
    version: int = 0
    """Every write or delete of one of its files adds one."""
    total_bytes: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    file_count: int = 0
    updated_at: float


class WorkspaceFileRow(SQLModel, table=True):
    __tablename__ = "workspace_files"

    session_id: str = Field(primary_key=True, max_length=200)
    path: str = Field(primary_key=True, max_length=512)
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    """Empty when `blob` names where it is."""
    blob: str | None = Field(default=None, max_length=32)
    """The content's blob in the blob directory (storage/workspace_blobs.py), if it is there."""
    size: int
    sha256: str = Field(max_length=64)
    version: int
    """The workspace's version this file was last written at."""
    updated_at: float


class WorkspaceChangeRow(SQLModel, table=True):
    """A change made by a tool call, once: its retry finds the result here and changes
    nothing again (exactly once by the call's id)."""

    __tablename__ = "workspace_changes"

    session_id: str = Field(primary_key=True, max_length=200)
    change_id: str = Field(primary_key=True, max_length=200)
    result: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    at: float


class WorkspaceSeenRow(SQLModel, table=True):
    """The version of a file a turn last read or left: its next change of that file expects
    it, so a change another turn made meanwhile is a conflict, not a silent overwrite."""

    __tablename__ = "workspace_seen"

    submission_id: str = Field(primary_key=True, max_length=64)
    path: str = Field(primary_key=True, max_length=512)
    session_id: str = Field(max_length=200)
    version: int
