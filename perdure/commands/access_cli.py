"""`perdure keys` and `perdure tenants`: API keys and tenant policies, straight in the store.

They talk to the store of PERDURE_DATABASE_URL (else the SQLite file in PERDURE_DATA_DIR), as
`perdure migrate` does, never to a gateway: every gateway on that store sees a change on its
next request.
"""

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from perdure.commands.configuration import configured
from perdure.domain.access import Rate, checked_tenant, parse_agents
from perdure.domain.turn_priority import MAX_FAIRNESS_WEIGHT, MIN_FAIRNESS_WEIGHT, checked_weight
from perdure.runtime.settings import Settings
from storage.access_tables import TenantPolicyRow
from storage.api_keys import (
    MAX_NAME_CHARS,
    create_key,
    list_keys,
    revoke_key,
)
from storage.db import Database
from storage.migrate import migrate
from storage.tenant_policies import (
    KEEP,
    MAX_TOKEN_BUDGET,
    UNLIMITED,
    get_policy,
    list_policies,
    set_policy,
)

ACCESS_COMMANDS = frozenset({"keys", "tenants"})
DEFAULT_RATE = "default"
"""`--rate default`: the tenant's own rate is dropped, PERDURE_RATE_LIMIT applies."""
DEFAULT_WEIGHT = "default"
"""`--weight default`: the tenant's turns weigh 1.0, as every tenant's."""
NO_BUDGET = "none"
"""`--daily-tokens none`, `--monthly-tokens none`: the tenant has no such budget."""


def _out(text: str) -> None:
    sys.stdout.write(f"{text}\n")


def _err(text: str) -> None:
    sys.stderr.write(f"{text}\n")


def _tenant(value: str) -> str:
    try:
        return checked_tenant(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _name(value: str) -> str:
    if not 1 <= len(value) <= MAX_NAME_CHARS or not value.isprintable():
        raise argparse.ArgumentTypeError(f"a name is 1-{MAX_NAME_CHARS} printable characters")
    return value


def _agents(value: str) -> list[str]:
    try:
        return parse_agents(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rate(value: str) -> str:
    if value in (UNLIMITED, DEFAULT_RATE):
        return value
    try:
        return str(Rate.parse(value))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error}, or {UNLIMITED}, or {DEFAULT_RATE}") from None


def _budget(value: str) -> int | str:
    if value == NO_BUDGET:
        return value
    try:
        tokens = int(value)
    except ValueError:
        tokens = 0
    if not 1 <= tokens <= MAX_TOKEN_BUDGET:
        raise argparse.ArgumentTypeError(
            f"a token budget is a positive whole number of tokens, or {NO_BUDGET}"
        ) from None
    return tokens


def _weight(value: str) -> float | str:
    if value == DEFAULT_WEIGHT:
        return value
    try:
        return checked_weight(float(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a fairness weight is a number from {MIN_FAIRNESS_WEIGHT} to "
            f"{MAX_FAIRNESS_WEIGHT:g}, or {DEFAULT_WEIGHT}"
        ) from None


def add_access_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    keys = commands.add_parser("keys", help="API keys in the store: create, list, revoke")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="make a key; it is printed once, here")
    create.add_argument("--tenant", type=_tenant, required=True, help="the tenant it acts as")
    create.add_argument("--name", type=_name, help="what the key is for (shown by `list`)")
    listing = key_commands.add_parser("list", help="the keys, never the keys themselves")
    listing.add_argument("--tenant", type=_tenant, help="only this tenant's")
    revoke = key_commands.add_parser("revoke", help="refuse a key from the next request on")
    revoke.add_argument("id", help="the key's id, as `list` shows it")

    tenants = commands.add_parser(
        "tenants", help="tenant policies: allowed agents, rate limits, token budgets"
    )
    tenant_commands = tenants.add_subparsers(dest="tenants_command", required=True)
    change = tenant_commands.add_parser(
        "set", help="change a tenant's policy (what is not given stays)"
    )
    change.add_argument("tenant", type=_tenant)
    agents = change.add_mutually_exclusive_group()
    agents.add_argument(
        "--agents", type=_agents, metavar="A,B", help="the only agents the tenant may use"
    )
    agents.add_argument(
        "--all-agents", action="store_true", help="let the tenant use every agent again"
    )
    change.add_argument(
        "--rate",
        type=_rate,
        metavar="RATE",
        help=f"e.g. 30/minute; {UNLIMITED} (no limit for this tenant); {DEFAULT_RATE} "
        "(PERDURE_RATE_LIMIT applies)",
    )
    change.add_argument(
        "--daily-tokens",
        type=_budget,
        metavar="N",
        help="the tenant's tokens (input + output) of a UTC day past which its new "
        f"submissions are refused (429 budget_exhausted); {NO_BUDGET}: no daily budget",
    )
    change.add_argument(
        "--monthly-tokens",
        type=_budget,
        metavar="N",
        help=f"the same over a calendar month (UTC); {NO_BUDGET}: no monthly budget",
    )
    change.add_argument(
        "--weight",
        type=_weight,
        metavar="W",
        help="the tenant's share of a backlogged task queue against other tenants' (Temporal "
        f"fairness weight, {MIN_FAIRNESS_WEIGHT}-{MAX_FAIRNESS_WEIGHT:g}) for its new turns; "
        f"{DEFAULT_WEIGHT}: 1.0",
    )
    show = tenant_commands.add_parser("show", help="a tenant's policy, as it applies")
    show.add_argument("tenant", type=_tenant)
    tenant_commands.add_parser("list", help="the tenants that have a policy")


def main(argv: list[str] | None = None) -> None:
    """`perdure keys|tenants` as the launcher runs them: without importing the gateway or
    Temporal's SDK (commands/launcher.py), which they never use."""
    parser = argparse.ArgumentParser(prog="perdure")
    add_access_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    settings = configured()
    raise SystemExit(run_access_command(args, settings))


def run_access_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "tenants" and args.tenants_command == "set":
        given = (args.agents, args.rate, args.daily_tokens, args.monthly_tokens, args.weight)
        if not args.all_agents and all(option is None for option in given):
            _err(
                "perdure tenants set: give --agents, --all-agents, --rate, --daily-tokens, "
                "--monthly-tokens or --weight"
            )
            return 2
    url = settings.resolved_database_url()
    migrate(url)  # as every command does on start
    return asyncio.run(_run(args, settings, url))


async def _run(args: argparse.Namespace, settings: Settings, url: str) -> int:
    db = Database(url)
    try:
        if args.command == "keys":
            return await _keys(args, db)
        return await _tenants(args, db, settings)
    finally:
        await db.close()


def _when(at: float | None) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M") if at is not None else "-"


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        _out("  ".join(cells).rstrip())


async def _keys(args: argparse.Namespace, db: Database) -> int:
    if args.keys_command == "create":
        made = await create_key(db, tenant_id=args.tenant, name=args.name)
        _out(made.key)
        _err(
            f"created {made.row.id} for tenant {made.row.tenant_id}: the key above is shown "
            "this once and cannot be read again; keep it now"
        )
        return 0
    if args.keys_command == "list":
        rows = [
            row
            for row in await list_keys(db)
            if args.tenant is None or row.tenant_id == args.tenant
        ]
        _table(
            ("ID", "TENANT", "NAME", "PREFIX", "CREATED", "LAST USED", "REVOKED"),
            [
                (
                    row.id,
                    row.tenant_id,
                    row.name or "-",
                    f"{row.prefix}…",
                    _when(row.created_at),
                    _when(row.last_used_at),
                    _when(row.revoked_at),
                )
                for row in rows
            ],
        )
        return 0
    revoked = await revoke_key(db, key_id=args.id)
    if revoked is None:
        _err(f"perdure keys revoke: no key {args.id[:100]!r}")
        return 1
    _out(f"{revoked.id} (tenant {revoked.tenant_id}) revoked at {_when(revoked.revoked_at)}")
    return 0


def _tokens(budget: int | None) -> str:
    return str(budget) if budget is not None else NO_BUDGET


def _describe(
    tenant: str, row: TenantPolicyRow | None, settings: Settings
) -> tuple[str, str, str, str, str]:
    agents = ", ".join(row.allowed_agents) if row and row.allowed_agents is not None else "all"
    own = row.rate_limit if row is not None else None
    if own is not None:
        rate = own
    elif settings.rate_limit is not None:
        rate = f"{settings.rate_limit} (PERDURE_RATE_LIMIT)"
    else:
        rate = "unlimited (PERDURE_RATE_LIMIT is unset)"
    daily = _tokens(row.daily_tokens if row is not None else None)
    monthly = _tokens(row.monthly_tokens if row is not None else None)
    weight = row.fairness_weight if row is not None else None
    return agents, rate, daily, monthly, f"{weight:g}" if weight is not None else DEFAULT_WEIGHT


async def _tenants(args: argparse.Namespace, db: Database, settings: Settings) -> int:
    if args.tenants_command == "list":
        rows = await list_policies(db)
        _table(
            ("TENANT", "AGENTS", "RATE", "DAILY TOKENS", "MONTHLY TOKENS", "WEIGHT"),
            [(row.tenant_id, *_describe(row.tenant_id, row, settings)) for row in rows],
        )
        return 0
    if args.tenants_command == "set":
        agents: list[str] | None | object = KEEP
        if args.agents is not None:
            agents = args.agents
        elif args.all_agents:
            agents = None
        rate: str | None | object = KEEP
        if args.rate is not None:
            rate = None if args.rate == DEFAULT_RATE else args.rate
        await set_policy(
            db,
            args.tenant,
            allowed_agents=agents,
            rate_limit=rate,
            daily_tokens=_budget_change(args.daily_tokens),
            monthly_tokens=_budget_change(args.monthly_tokens),
            fairness_weight=(
                KEEP
                if args.weight is None
                else None
                if args.weight == DEFAULT_WEIGHT
                else args.weight
            ),
        )
    row = await get_policy(db, args.tenant)
    allowed, rate_text, daily, monthly, weight = _describe(args.tenant, row, settings)
    _out(
        f"tenant          {args.tenant}\nagents          {allowed}\nrate            {rate_text}\n"
        f"daily tokens    {daily}\nmonthly tokens  {monthly}\nweight          {weight}"
    )
    return 0


def _weight_change(option: float | str | None) -> float | None | object:
    """What `set_policy` is given for a `--weight` option."""
    if option is None:
        return KEEP
    return None if option == DEFAULT_WEIGHT else option


def _budget_change(option: int | str | None) -> int | None | object:
    """What `set_policy` is given for a `--daily-tokens`/`--monthly-tokens` option."""
    if option is None:
        return KEEP
    return None if option == NO_BUDGET else option
