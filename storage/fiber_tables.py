"""The fiber tables. Migration 0005 owns the schema; these mirror it."""

from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


class FiberRow(SQLModel, table=True):
    """The ledger of durable fibers: one row per fiber, tenant-scoped."""

    __tablename__ = "fibers"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_fiber_key"),
        Index("ix_fibers_tenant_status", "tenant_id", "status", "created_at"),
        Index("ix_fibers_status_created", "status", "created_at"),
    )

    id: str = Field(primary_key=True, max_length=64)
    tenant_id: str = Field(max_length=200)
    agent: str = Field(max_length=200)
    name: str = Field(max_length=100)
    idempotency_key: str | None = Field(default=None, max_length=300)
    status: str = Field(max_length=16)
    """pending → running → completed | cancelled | error."""
    payload: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    snapshot: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    """The last `ctx.stash(...)`; a recovered attempt starts from it."""
    result: Any = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str | None = Field(default=None)
    meta: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSON, nullable=False)
    )
    attempts: int = 0
    """Attempts that have claimed the fiber; a write by any older attempt is refused."""
    created_at: float
    started_at: float | None = None
    completed_at: float | None = None


class FiberKindRow(SQLModel, table=True):
    """The fibers the workers of a task queue serve, recorded at worker start, so the gateway
    (which never loads agent code) can check a start against them."""

    __tablename__ = "fiber_kinds"

    task_queue: str = Field(primary_key=True, max_length=200)
    agent: str = Field(primary_key=True, max_length=200)
    name: str = Field(primary_key=True, max_length=100)
    max_age_seconds: float
    max_run_seconds: float
    max_attempts: int
    hook_timeout_seconds: float
    updated_at: float
