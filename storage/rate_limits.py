"""Per-tenant rate limits on submissions: a token bucket per tenant, a row in the store.

Every gateway takes from the same row, inside the transaction that records the submission:
the row is locked (PostgreSQL `FOR UPDATE`; SQLite has one writer at a time), refilled for the
time since it was last touched, and one token taken. A refused submission rolls the whole
transaction back, so it leaves nothing written, and a repeated request that returns an
existing submission never gets here, so it costs nothing.
"""

import math

from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, select

from perdure.domain.access import Rate
from storage.access_tables import RateBucketRow
from storage.errors import RateLimited


def take_token(session: Session, *, tenant_id: str, rate: Rate, at: float) -> None:
    """Take one submission from the tenant's bucket, or raise `RateLimited` with the whole
    seconds until one is back."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    insert = postgres_insert if dialect == "postgresql" else sqlite_insert
    # A new tenant's bucket starts full; of gateways that create it at once, one inserts it.
    session.exec(
        insert(RateBucketRow)
        .values(tenant_id=tenant_id, tokens=float(rate.count), refilled_at=at)
        .on_conflict_do_nothing(index_elements=["tenant_id"])
    )
    result = session.exec(
        select(RateBucketRow).where(RateBucketRow.tenant_id == tenant_id).with_for_update()
    )
    bucket = result.one()
    # A clock that went back (another gateway's, a little behind) refills nothing.
    elapsed = max(0.0, at - bucket.refilled_at)
    tokens = min(float(rate.count), bucket.tokens + elapsed * rate.per_second)
    if tokens < 1.0:
        retry_after = max(1, math.ceil((1.0 - tokens) / rate.per_second))
        raise RateLimited(
            f"too many submissions: this tenant may make {rate}; retry in {retry_after} s",
            retry_after=retry_after,
        )
    bucket.tokens = tokens - 1.0
    bucket.refilled_at = max(at, bucket.refilled_at)
    session.add(bucket)
