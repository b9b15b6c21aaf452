"""Tenant policies: which agents a tenant may use, its own rate limit and its token budgets
(`perdure tenants`), and the check of a new submission against them (`TenantLimits`, run in
its transaction; not to be confused with a session admitting a queued submission to run).

A token budget is checked against the store's tokens of the tenant (storage/usage.py) at each
intake, so it holds for every gateway on the store. It refuses new submissions only: a turn
already running when the budget is crossed finishes (its tokens count), and the tenant's next
submission is refused until the day (or month) is over, in UTC, or the budget is raised.
"""

import datetime
import math
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from perdure.domain.access import Rate, checked_tenant
from perdure.domain.turn_priority import checked_weight
from storage.access_tables import TenantPolicyRow
from storage.db import Database
from storage.errors import AgentNotAllowed, BudgetExhausted
from storage.rate_limits import take_token
from storage.timing import now
from storage.usage import tenant_tokens

UNLIMITED = "unlimited"
"""A tenant's rate that lifts PERDURE_RATE_LIMIT for it."""
MAX_TOKEN_BUDGET = 2**63 - 1
"""The largest budget a column holds (BIGINT)."""
KEEP = object()
"""`set_policy`: leave this part as it is."""


@dataclass(frozen=True)
class TenantLimits:
    """What a new submission of a tenant must pass, checked in the transaction that records it
    (storage/intake.py), so a refusal leaves nothing written."""

    tenant_id: str
    allowed_agents: frozenset[str] | None = None
    """None: every agent."""
    rate: Rate | None = None
    """None: no limit."""
    daily_tokens: int | None = None
    """The tenant's tokens of a UTC day past which it is refused; None: no daily budget."""
    monthly_tokens: int | None = None
    """The same over a calendar month (UTC); None: no monthly budget."""
    fairness_weight: float | None = None
    """The tenant's share of a backlogged task queue; None: Temporal's default (1.0)."""

    def usable(self, agents: Iterable[str]) -> list[str]:
        """Those of `agents` the tenant may use, sorted: what a refusal may name to it."""
        return sorted(a for a in agents if self.allowed_agents is None or a in self.allowed_agents)

    def check_agent(self, agent: str) -> None:
        if self.allowed_agents is not None and agent not in self.allowed_agents:
            raise AgentNotAllowed(f"agent {agent!r} is not allowed for this tenant")

    def check(self, session: Session, *, agent: str, at: float) -> None:
        """The agent first, then the token budgets, then the rate: a refusal costs no token."""
        self.check_agent(agent)
        self.check_budgets(session, at=at)
        if self.rate is not None:
            take_token(session, tenant_id=self.tenant_id, rate=self.rate, at=at)

    def check_budgets(self, session: Session, *, at: float) -> None:
        """Raise `BudgetExhausted` when the tenant's tokens of today (UTC), or of this month,
        reached its budget, with the seconds until the budget resets (the later of the two
        when both are used up). Reads the store's tokens now: a turn still running counts
        only for what its finished model steps stored."""
        if self.daily_tokens is None and self.monthly_tokens is None:
            return
        today = datetime.datetime.fromtimestamp(at, datetime.UTC).date()
        exhausted: list[tuple[str, int]] = []  # (why, seconds until it resets)
        if self.daily_tokens is not None:
            day = today.isoformat()
            used = tenant_tokens(session, self.tenant_id, first_day=day, last_day=day)
            if used >= self.daily_tokens:
                retry_after = _seconds_until(today + datetime.timedelta(days=1), at)
                exhausted.append(
                    (
                        f"daily token budget of {_tokens(self.daily_tokens)} is used up "
                        f"({_tokens(used)} on {day}, UTC)",
                        retry_after,
                    )
                )
        if self.monthly_tokens is not None:
            first = today.replace(day=1)
            following = (first + datetime.timedelta(days=32)).replace(day=1)
            last = following - datetime.timedelta(days=1)
            used = tenant_tokens(
                session, self.tenant_id, first_day=first.isoformat(), last_day=last.isoformat()
            )
            if used >= self.monthly_tokens:
                exhausted.append(
                    (
                        f"monthly token budget of {_tokens(self.monthly_tokens)} is used up "
                        f"({_tokens(used)} in {first:%Y-%m}, UTC)",
                        _seconds_until(following, at),
                    )
                )
        if exhausted:
            retry_after = max(seconds for _, seconds in exhausted)
            reasons = " and its ".join(why for why, _ in exhausted)
            raise BudgetExhausted(
                f"this tenant's {reasons}; retry in {retry_after} s", retry_after=retry_after
            )


def _tokens(count: int) -> str:
    return f"{count:,} token" if count == 1 else f"{count:,} tokens"


def _seconds_until(day: datetime.date, at: float) -> int:
    """Whole seconds from `at` to `day`'s 00:00 UTC, at least 1."""
    midnight = datetime.datetime.combine(day, datetime.time(), datetime.UTC)
    return max(1, math.ceil(midnight.timestamp() - at))


@dataclass(frozen=True)
class _Policy:
    """The parts of a tenant's policy a submission is checked against."""

    allowed_agents: list[str] | None
    rate_limit: str | None
    daily_tokens: int | None
    monthly_tokens: int | None
    fairness_weight: float | None


def rate_of(row: _Policy | None, default: Rate | None) -> Rate | None:
    """The tenant's own rate, else `default` (PERDURE_RATE_LIMIT); None: no limit."""
    if row is None or row.rate_limit is None:
        return default
    return None if row.rate_limit == UNLIMITED else Rate.parse(row.rate_limit)


async def get_policy(db: Database, tenant_id: str) -> TenantPolicyRow | None:
    return await db.read_sync(lambda session: session.get(TenantPolicyRow, tenant_id))


async def _checked_policy(db: Database, tenant_id: str) -> _Policy | None:
    """One read by primary key, on every submission (no ORM session: `read_connection`)."""
    statement = select_columns(
        col(TenantPolicyRow.allowed_agents),
        col(TenantPolicyRow.rate_limit),
        col(TenantPolicyRow.daily_tokens),
        col(TenantPolicyRow.monthly_tokens),
        col(TenantPolicyRow.fairness_weight),
    ).where(col(TenantPolicyRow.tenant_id) == tenant_id)
    row = await db.read_connection(lambda connection: connection.execute(statement).first())
    if row is None:
        return None
    return _Policy(
        allowed_agents=row[0],
        rate_limit=row[1],
        daily_tokens=row[2],
        monthly_tokens=row[3],
        fairness_weight=row[4],
    )


async def limits_for(db: Database, tenant_id: str, default_rate: Rate | None) -> TenantLimits:
    """Read on every submission (the policy in one statement): a policy change holds at once,
    on every gateway."""
    policy = await _checked_policy(db, tenant_id)
    return TenantLimits(
        tenant_id=tenant_id,
        allowed_agents=_allowed_agents(policy),
        rate=rate_of(policy, default_rate),
        daily_tokens=policy.daily_tokens if policy is not None else None,
        monthly_tokens=policy.monthly_tokens if policy is not None else None,
        fairness_weight=policy.fairness_weight if policy is not None else None,
    )


async def agent_limits(db: Database, tenant_id: str) -> TenantLimits:
    """The tenant's allowed agents only: for a submission that is no request (a scheduled
    prompt's occurrence), which neither the rate limit nor the token budgets check (its
    tokens still count towards them, for the tenant's next request)."""
    policy = await _checked_policy(db, tenant_id)
    return TenantLimits(
        tenant_id=tenant_id,
        allowed_agents=_allowed_agents(policy),
        fairness_weight=policy.fairness_weight if policy is not None else None,
    )


def _allowed_agents(policy: _Policy | None) -> frozenset[str] | None:
    agents = policy.allowed_agents if policy is not None else None
    return frozenset(agents) if agents is not None else None


async def list_policies(db: Database) -> list[TenantPolicyRow]:
    async with db.read() as session:
        rows = await session.exec(select(TenantPolicyRow).order_by(col(TenantPolicyRow.tenant_id)))
        return list(rows.all())


async def set_policy(
    db: Database,
    tenant_id: str,
    *,
    allowed_agents: list[str] | None | object = KEEP,
    rate_limit: str | None | object = KEEP,
    daily_tokens: int | None | object = KEEP,
    monthly_tokens: int | None | object = KEEP,
    fairness_weight: float | None | object = KEEP,
) -> TenantPolicyRow:
    """Change what is given, keep the rest. `allowed_agents` None allows every agent;
    `rate_limit` is a `Rate` text, `unlimited`, or None (PERDURE_RATE_LIMIT applies);
    `daily_tokens` and `monthly_tokens` are positive token budgets, or None (no budget);
    `fairness_weight` is from 0.001 to 1000, or None (1.0)."""
    checked_tenant(tenant_id)
    if isinstance(rate_limit, str) and rate_limit != UNLIMITED:
        rate_limit = str(Rate.parse(rate_limit))
    for name, budget in (("daily_tokens", daily_tokens), ("monthly_tokens", monthly_tokens)):
        if budget is not KEEP and budget is not None and not _positive_int(budget):
            raise ValueError(
                f"{name} is a whole number of tokens from 1 to {MAX_TOKEN_BUDGET}, or None"
            )
    if isinstance(fairness_weight, int | float) and not isinstance(fairness_weight, bool):
        fairness_weight = checked_weight(float(fairness_weight))
    elif fairness_weight is not KEEP and fairness_weight is not None:
        raise ValueError("fairness_weight is a number from 0.001 to 1000, or None")
    async with db.write() as session:
        row = await session.get(TenantPolicyRow, tenant_id, with_for_update=True)
        if row is None:
            row = TenantPolicyRow(tenant_id=tenant_id, updated_at=now())
        if allowed_agents is not KEEP:
            row.allowed_agents = allowed_agents  # type: ignore[assignment]
        if rate_limit is not KEEP:
            row.rate_limit = rate_limit  # type: ignore[assignment]
        if daily_tokens is not KEEP:
            row.daily_tokens = daily_tokens  # type: ignore[assignment]
        if monthly_tokens is not KEEP:
            row.monthly_tokens = monthly_tokens  # type: ignore[assignment]
        if fairness_weight is not KEEP:
            row.fairness_weight = fairness_weight  # type: ignore[assignment]
        row.updated_at = now()
        session.add(row)
        return row


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKEN_BUDGET
