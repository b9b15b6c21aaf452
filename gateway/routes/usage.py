"""`GET /v1/usage`: the caller's tenant's model usage over a time range (docs/usage.md)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from gateway.deps import DbDep, SettingsDep, TenantDep
from gateway.errors import ApiError, InvalidField, invalid_request
from gateway.schemas.common import ERROR_RESPONSES
from gateway.schemas.usage import UsageReport, UsageRow, UsageTotals
from perdure.domain.prices import PriceTable
from perdure.domain.usage import Usage
from storage.usage import USAGE_GROUPS, ReportTooLarge, UsageGroup, usage_report

router = APIRouter(prefix="/v1/usage", tags=["usage"])
DEFAULT_RANGE = timedelta(days=30)
MAX_RANGE = timedelta(days=400)


@dataclass
class _Sum:
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    cost: float | None = 0.0

    def add(self, group: UsageGroup, cost: float | None) -> None:
        self.usage += group.usage
        self.calls += group.calls
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    def totals(self, priced: bool) -> UsageTotals:
        return UsageTotals.of(self.usage, self.calls, self.cost if priced else None)


def _moment(value: datetime | None, default: datetime) -> datetime:
    if value is None:
        return default
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _groups(group_by: str | None) -> tuple[str, ...]:
    names = tuple(name.strip() for name in (group_by or "").split(",") if name.strip())
    unknown = [name for name in names if name not in USAGE_GROUPS]
    if unknown:
        known = ", ".join(USAGE_GROUPS)
        raise InvalidField(
            "query.group_by", f"cannot group by {', '.join(unknown)}: one of {known}"
        )
    if len(set(names)) != len(names):
        raise InvalidField("query.group_by", "names a group twice")
    return names


@router.get(
    "",
    response_model=UsageReport,
    responses=ERROR_RESPONSES,
    summary="What the tenant's model calls consumed, summed over a time range",
)
async def get_usage(
    db: DbDep,
    settings: SettingsDep,
    tenant: TenantDep,
    start: Annotated[
        datetime | None,
        Query(description="ISO 8601, included; without a zone, UTC. Default: 30 days before end."),
    ] = None,
    end: Annotated[
        datetime | None, Query(description="ISO 8601, excluded; without a zone, UTC. Default: now.")
    ] = None,
    group_by: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Comma-separated: any of `session`, `agent`, `model`, `day` (UTC). "
            "Unset: one total.",
        ),
    ] = None,
) -> UsageReport:
    try:
        groups = _groups(group_by)
        since, until = _period(start, end)
    except InvalidField as error:
        raise invalid_request(error) from None
    prices = settings.prices
    # Costs are per model: summed by model too, then folded into the groups asked for.
    queried = groups if prices is None or "model" in groups else (*groups, "model")
    try:
        found = await usage_report(
            db,
            tenant_id=tenant,
            start=since.timestamp(),
            end=until.timestamp(),
            group_by=queried,
        )
    except ReportTooLarge as error:
        raise ApiError(422, "report_too_large", str(error)) from None
    return _report(tenant, since, until, groups, found, prices)


def _period(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """The range asked for, in UTC, with its defaults; `InvalidField` when it is empty or
    longer than `MAX_RANGE`."""
    until = _moment(end, datetime.now(UTC))
    try:
        since = _moment(start, until - DEFAULT_RANGE)
    except OverflowError:
        raise InvalidField("query.end", "too early for a range of its own") from None
    if until <= since:
        raise InvalidField("query.end", "must be after start")
    if until - since > MAX_RANGE:
        raise InvalidField("query.start", f"the range is at most {MAX_RANGE.days} days")
    return since, until


def _report(
    tenant: str,
    since: datetime,
    until: datetime,
    groups: tuple[str, ...],
    found: list[UsageGroup],
    prices: PriceTable | None,
) -> UsageReport:
    """The stored groups folded into those asked for, each priced when prices are known."""
    rows: dict[tuple[str | None, ...], _Sum] = {}
    total, unpriced = _Sum(), set[str]()
    for group in found:
        cost = _cost(prices, group, unpriced)
        rows.setdefault(tuple(group.keys[name] for name in groups), _Sum()).add(group, cost)
        total.add(group, cost)
    priced = prices is not None
    return UsageReport(
        tenant=tenant,
        start=since,
        end=until,
        groupBy=list(groups),
        rows=[
            UsageRow(**summed.totals(priced).model_dump(), **dict(zip(groups, keys, strict=True)))
            for keys, summed in rows.items()
        ],
        total=total.totals(priced),
        unpricedModels=sorted(unpriced),
    )


def _cost(prices: PriceTable | None, group: UsageGroup, unpriced: set[str]) -> float | None:
    if prices is None:
        return None
    model = group.keys["model"] or ""
    cost = prices.cost(model, group.usage)
    if cost is None:
        unpriced.add(model)
    return cost
