"""Model usage in the store: a step's usage goes in with its last chunks (`insert_batches`);
here, the reads: a turn's totals, a tenant's tokens of a day and a month, the usage report."""

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from perdure.domain.usage import Usage
from storage.db import Database
from storage.usage_tables import ModelUsageRow, TenantUsageDayRow


@dataclass(frozen=True)
class StepUsage:
    """What one attempt of one model step consumed, and whose it was."""

    submission_id: str
    step: int
    attempt: int
    tenant_id: str
    session_id: str
    chat_id: str | None
    agent: str
    model: str
    usage: Usage


def utc_day(at: float) -> str:
    """`at` (seconds since the epoch) as its UTC date, `2026-11-26`."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).date().isoformat()


_TOTALS = (
    func.count(),
    func.sum(ModelUsageRow.input_tokens),
    func.sum(ModelUsageRow.cached_input_tokens),
    func.sum(ModelUsageRow.output_tokens),
    func.sum(ModelUsageRow.reasoning_tokens),
)
"""Model calls, and their tokens summed: what every usage read selects after its keys."""


def _totals(row: Sequence[Any]) -> tuple[int, Usage] | None:
    """`_TOTALS` as read: the calls and their usage; None for the sums of no call."""
    calls, input_tokens, cached, output_tokens, reasoning = row
    if not calls:
        return None
    usage = Usage(
        input=input_tokens, cached_input=cached, output=output_tokens, reasoning=reasoning
    )
    return int(calls), usage


def turn_usage(session: Session, submission_id: str) -> Usage | None:
    """Everything a turn's model calls consumed, every attempt counted; None before any call
    reported its usage."""
    statement = select_columns(*_TOTALS).where(col(ModelUsageRow.submission_id) == submission_id)
    totals = _totals(session.connection().execute(statement).one())
    return totals[1] if totals is not None else None


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


USAGE_GROUPS = ("session", "agent", "model", "day")
"""What `usage_report` can sum by (besides the tenant, which is always one)."""
MAX_REPORT_ROWS = 10_000

_GROUP_COLUMNS = {
    "session": col(ModelUsageRow.chat_id),
    "agent": col(ModelUsageRow.agent),
    "model": col(ModelUsageRow.model),
    "day": col(ModelUsageRow.day),
}


class ReportTooLarge(ValueError):
    """More than `MAX_REPORT_ROWS` groups: the caller narrows the range or groups by less."""


@dataclass(frozen=True)
class UsageGroup:
    """One group of a usage report: its keys (by `USAGE_GROUPS` name), its model calls and
    their usage."""

    keys: dict[str, str | None]
    calls: int
    usage: Usage


async def usage_report(
    db: Database, *, tenant_id: str, start: float, end: float, group_by: tuple[str, ...]
) -> list[UsageGroup]:
    """A tenant's usage from `start` (included) to `end` (excluded), in seconds since the
    epoch, summed by `group_by` (ordered by it); one group for all when it is empty."""
    columns = [_GROUP_COLUMNS[name] for name in group_by]
    statement = (
        select_columns(*columns, *_TOTALS)
        .where(
            col(ModelUsageRow.tenant_id) == tenant_id,
            col(ModelUsageRow.at) >= start,
            col(ModelUsageRow.at) < end,
        )
        .group_by(*columns)
        .order_by(*columns)
        .limit(MAX_REPORT_ROWS + 1)
    )
    async with db.read() as session:
        rows = (await (await session.connection()).execute(statement)).all()
    if len(rows) > MAX_REPORT_ROWS:
        raise ReportTooLarge(
            f"the report has over {MAX_REPORT_ROWS} groups: narrow the time range or group by less"
        )
    groups: list[UsageGroup] = []
    for row in rows:
        totals = _totals(row[len(columns) :])
        if totals is not None:  # None: no group at all, the sums of nothing
            keys = dict(zip(group_by, row[: len(columns)], strict=True))
            groups.append(UsageGroup(keys=keys, calls=totals[0], usage=totals[1]))
    return groups
