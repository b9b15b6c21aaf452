"""Tables of access control (migration 0011): API keys, tenant policies (their token budgets:
migration 0015), rate buckets."""

from sqlalchemy import JSON, BigInteger, Column
from sqlmodel import Field, SQLModel


class ApiKeyRow(SQLModel, table=True):
    """A key made by `perdure keys create`. The key itself is never stored: only its SHA-256,
    looked up by the unique index on `key_hash`, and a short prefix to recognise it by."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=32)
    key_hash: str = Field(max_length=64, unique=True, index=True)
    """Hex SHA-256 of the whole key (`pk_…`)."""
    prefix: str = Field(max_length=16)
    """The key's first characters (`pk_` and 6 more): enough to tell keys apart, not to guess."""
    tenant_id: str = Field(max_length=200, index=True)
    name: str | None = Field(default=None, max_length=200)
    created_at: float
    last_used_at: float | None = None
    """Updated at most once a minute (storage/api_keys.py `LAST_USED_GRANULARITY`)."""
    revoked_at: float | None = Field(default=None, index=True)


class TenantPolicyRow(SQLModel, table=True):
    """What a tenant may do beyond the gateway's defaults (`perdure tenants set`)."""

    __tablename__ = "tenant_policies"

    tenant_id: str = Field(primary_key=True, max_length=200)
    allowed_agents: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    """The agents the tenant may talk to; None: all of them."""
    rate_limit: str | None = Field(default=None, max_length=32)
    """`30/minute` (domain.access.Rate), `unlimited`, or None: PERDURE_RATE_LIMIT applies."""
    daily_tokens: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """The tenant's tokens (input + output) of a UTC day past which a new submission is refused
    (migration 0015); None: no daily budget."""
    monthly_tokens: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    """The same over a calendar month (UTC); None: no monthly budget."""
    fairness_weight: float | None = None
    """The tenant's share of a backlogged task queue against others' (Temporal fairness,
    migration 0016); None: 1.0, as every tenant's."""
    updated_at: float


class RateBucketRow(SQLModel, table=True):
    """A tenant's token bucket of submissions, shared by every gateway on the store."""

    __tablename__ = "rate_buckets"

    tenant_id: str = Field(primary_key=True, max_length=200)
    tokens: float
    """Left at `refilled_at`; the bucket refills at the tenant's rate, up to its count."""
    refilled_at: float
