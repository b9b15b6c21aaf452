"""Model usage in the store: a step's usage goes in with its last chunks (`insert_batches`);
here, the reads: a turn's totals, a tenant's tokens of a day and a month, the usage report."""

import datetime
from dataclasses import dataclass

from sqlalchemy import func
from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from perdure.domain.usage import Usage
from storage.usage_tables import ModelUsageRow, TenantUsageDayRow


@dataclass(frozen=True)
class StepUsage:
    """What one attempt of one model step consumed, and whose it was."""

    submission_id: str
    step: int
    attempt: int
    tenant_id: str
    session_id: str
    agent: str
    model: str
    usage: Usage


def utc_day(at: float) -> str:
    """`at` (seconds since the epoch) as its UTC date, `2026-11-26`."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).date().isoformat()


def turn_usage(session: Session, submission_id: str) -> Usage | None:
    """Everything a turn's model calls consumed, every attempt counted; None before any call
    reported its usage."""
    row = (
        session.connection()
        .execute(
            select_columns(
                func.count(),
                func.sum(ModelUsageRow.input_tokens),
                func.sum(ModelUsageRow.cached_input_tokens),
                func.sum(ModelUsageRow.output_tokens),
                func.sum(ModelUsageRow.reasoning_tokens),
            ).where(col(ModelUsageRow.submission_id) == submission_id)
        )
        .one()
    )
    calls, input_tokens, cached, output_tokens, reasoning = row
    if not calls:
        return None
    return Usage(input=input_tokens, cached_input=cached, output=output_tokens, reasoning=reasoning)


def tenant_tokens(session: Session, tenant_id: str, *, first_day: str, last_day: str) -> int:
    """A tenant's tokens (input + output) from `first_day` to `last_day`, both included."""
    total = session.exec(
        select(func.sum(TenantUsageDayRow.tokens)).where(
            TenantUsageDayRow.tenant_id == tenant_id,
            col(TenantUsageDayRow.day) >= first_day,
            col(TenantUsageDayRow.day) <= last_day,
        )
    ).one()
    return int(total or 0)
