"""Tables of model usage (migration 0015): one row per model call, and each tenant's tokens
per day (what its budgets are checked against at intake)."""

from sqlalchemy import BigInteger, Column
from sqlmodel import Field, SQLModel


class ModelUsageRow(SQLModel, table=True):
    """What one attempt of one model step consumed, as its provider reported it. Written with
    the step's last chunks, in the same transaction (storage/chunks.py `insert_batches`): a
    step's usage is in the store exactly when its end is in the log. Kept when the session is
    deleted (it holds no content: counts and ids), so a tenant's totals do not shrink."""

    __tablename__ = "model_usage"

    submission_id: str = Field(primary_key=True, max_length=64)
    step: int = Field(primary_key=True)
    attempt: int = Field(primary_key=True)
    """Each attempt its own row: a recovery's calls count as the provider billed them."""
    tenant_id: str = Field(max_length=200)
    session_id: str = Field(max_length=200)
    chat_id: str | None = Field(default=None, max_length=200)
    """The session's id as its client knows it (what `GET /v1/usage` names)."""
    agent: str = Field(max_length=200)
    model: str = Field(max_length=200)
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    at: float
    """When the call ended (seconds since the epoch)."""
    day: str = Field(max_length=10)
    """`at` as a UTC date, `2026-11-26`."""


class TenantUsageDayRow(SQLModel, table=True):
    """A tenant's tokens (input + output) of one UTC day, kept up to date with every usage
    row: intake checks a daily budget on one row and a monthly one on at most 31."""

    __tablename__ = "tenant_usage_days"

    tenant_id: str = Field(primary_key=True, max_length=200)
    day: str = Field(primary_key=True, max_length=10)
    tokens: int = Field(sa_column=Column(BigInteger, nullable=False))
