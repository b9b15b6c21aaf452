"""Tenant policies: which agents a tenant may use and its own rate limit (`perdure tenants`),
and the check of a new submission against them (`TenantLimits`, run in its transaction;
not to be confused with a session admitting a queued submission to run)."""

from collections.abc import Iterable
from dataclasses import dataclass

from sqlmodel import Session, col, select

from perdure.domain.access import Rate, checked_tenant
from storage.access_tables import TenantPolicyRow
from storage.db import Database
from storage.errors import AgentNotAllowed
from storage.rate_limits import take_token
from storage.timing import now

UNLIMITED = "unlimited"
"""A tenant's rate that lifts PERDURE_RATE_LIMIT for it."""
KEEP = object()
"""`set_policy`: leave this part as it is."""


@dataclass(frozen=True)
class TenantLimits:
    """What a new submission of a tenant must pass, checked in the transaction that records it
    (storage/submissions.py), so a refusal leaves nothing written."""

    tenant_id: str
    allowed_agents: frozenset[str] | None = None
    """None: every agent."""
    rate: Rate | None = None
    """None: no limit."""

    def usable(self, agents: Iterable[str]) -> list[str]:
        """Those of `agents` the tenant may use, sorted: what a refusal may name to it."""
        return sorted(a for a in agents if self.allowed_agents is None or a in self.allowed_agents)

    def check_agent(self, agent: str) -> None:
        if self.allowed_agents is not None and agent not in self.allowed_agents:
            raise AgentNotAllowed(f"agent {agent!r} is not allowed for this tenant")

    def check(self, session: Session, *, agent: str, at: float) -> None:
        """The agent first: a refused agent costs no token."""
        self.check_agent(agent)
        if self.rate is not None:
            take_token(session, tenant_id=self.tenant_id, rate=self.rate, at=at)


@dataclass(frozen=True)
class _Policy:
    """The parts of a tenant's policy a submission is checked against."""

    allowed_agents: list[str] | None
    rate_limit: str | None


def rate_of(row: _Policy | None, default: Rate | None) -> Rate | None:
    """The tenant's own rate, else `default` (PERDURE_RATE_LIMIT); None: no limit."""
    if row is None or row.rate_limit is None:
        return default
    return None if row.rate_limit == UNLIMITED else Rate.parse(row.rate_limit)


async def get_policy(db: Database, tenant_id: str) -> TenantPolicyRow | None:
    return await db.read_sync(lambda session: session.get(TenantPolicyRow, tenant_id))


async def _checked_policy(db: Database, tenant_id: str) -> _Policy | None:
    """One read by primary key, on every submission (no ORM session: `read_connection`)."""
    statement = select(TenantPolicyRow.allowed_agents, TenantPolicyRow.rate_limit).where(
        col(TenantPolicyRow.tenant_id) == tenant_id
    )
    row = await db.read_connection(lambda connection: connection.execute(statement).first())
    return None if row is None else _Policy(allowed_agents=row[0], rate_limit=row[1])


async def limits_for(db: Database, tenant_id: str, default_rate: Rate | None) -> TenantLimits:
    """Read on every submission: a policy change holds at once."""
    policy = await _checked_policy(db, tenant_id)
    return TenantLimits(
        tenant_id=tenant_id,
        allowed_agents=_allowed_agents(policy),
        rate=rate_of(policy, default_rate),
    )


async def agent_limits(db: Database, tenant_id: str) -> TenantLimits:
    """The tenant's allowed agents only: for a submission that is no request (a scheduled
    prompt's occurrence), which no rate limit counts."""
    policy = await _checked_policy(db, tenant_id)
    return TenantLimits(tenant_id=tenant_id, allowed_agents=_allowed_agents(policy))


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
) -> TenantPolicyRow:
    """Change what is given, keep the rest. `allowed_agents` None allows every agent;
    `rate_limit` is a `Rate` text, `unlimited`, or None (PERDURE_RATE_LIMIT applies)."""
    checked_tenant(tenant_id)
    if isinstance(rate_limit, str) and rate_limit != UNLIMITED:
        rate_limit = str(Rate.parse(rate_limit))
    async with db.write() as session:
        row = await session.get(TenantPolicyRow, tenant_id, with_for_update=True)
        if row is None:
            row = TenantPolicyRow(tenant_id=tenant_id, updated_at=now())
        if allowed_agents is not KEEP:
            row.allowed_agents = allowed_agents  # type: ignore[assignment]
        if rate_limit is not KEEP:
            row.rate_limit = rate_limit  # type: ignore[assignment]
        row.updated_at = now()
        session.add(row)
        return row
