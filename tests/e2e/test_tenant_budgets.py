"""Token budgets: a tenant's daily and monthly tokens (input + output, UTC), read from the store
at each intake, so every gateway refuses a tenant that used its budget (429 budget_exhausted,
Retry-After until the budget resets) and a policy change holds at once."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import col, select

from perdure.commands import cli
from perdure.domain.access import Rate
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import chat_body, send, user_message
from perdure.testing.stack import Stack
from storage.db import Database
from storage.tenant_policies import get_policy, set_policy
from storage.timing import clock
from storage.usage_tables import ModelUsageRow
from tests.e2e.conftest import Gateway, unique


async def submit(client: httpx.AsyncClient, session: str) -> httpx.Response:
    body = {"messages": [user_message("@count 1")]}
    return await client.post(f"/v1/sessions/{session}/submissions", json=body)


async def use_a_turn(client: httpx.AsyncClient, session: str) -> None:
    """One turn to its end: its tokens are in the store when its stream is over."""
    streamed = await send(client, session, "@count 3")
    assert streamed.status == 200 and streamed.types()[-1] == "finish", streamed.types()


async def tokens_used_at(db: Database, tenant: str) -> float:
    """When the store recorded the tenant's last tokens (its model step's usage): the day they
    count for is this instant's UTC date."""
    async with db.read() as session:
        at = (
            await session.exec(
                select(func.max(ModelUsageRow.at)).where(col(ModelUsageRow.tenant_id) == tenant)
            )
        ).one()
    assert at is not None, f"no tokens recorded for {tenant}"
    return float(at)


@contextmanager
def checked_at(at: float) -> Iterator[None]:
    """The gateways of this test (served in its task) check budgets at `at`, not at the wall
    clock's time: the tokens a spec used and the check that counts them fall on the day the
    spec says, whatever the time of day it runs at."""
    with clock(lambda: at):
        yield


def at_time(day: date, of_day: time) -> float:
    return datetime.combine(day, of_day, UTC).timestamp()


def day_of(at: float) -> date:
    return datetime.fromtimestamp(at, UTC).date()


def seconds_until(day: date, at: float) -> float:
    return at_time(day, time()) - at


def next_month(today: date) -> date:
    return (today.replace(day=1) + timedelta(days=32)).replace(day=1)


def refusal(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "budget_exhausted"
    assert error["retryAfterSeconds"] == int(response.headers["Retry-After"])
    return error


async def test_a_tenant_whose_daily_budget_is_used_gets_429_until_utc_midnight_and_nothing_is_written(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, session, fresh = unique("budget"), unique("chat"), unique("chat")
    await set_policy(stack.services.db, tenant, daily_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, session)
        at = await tokens_used_at(stack.services.db, tenant)
        midnight = seconds_until(day_of(at) + timedelta(days=1), at)
        with checked_at(at):
            refused = await submit(client, session)
            refused_chat = await client.post("/api/chat", json=chat_body(fresh, user_message("hi")))
        submissions = (await client.get(f"/v1/sessions/{session}/submissions")).json()
        fresh_session = await client.get(f"/v1/sessions/{fresh}")

    error = refusal(refused)
    assert midnight - 5 <= error["retryAfterSeconds"] <= midnight + 1
    assert re.fullmatch(
        r"this tenant's daily token budget of 1 token is used up "
        r"\([\d,]+ tokens on \d{4}-\d\d-\d\d, UTC\); retry in \d+ s",
        error["message"],
    ), error["message"]
    refusal(refused_chat)
    assert submissions["count"] == 1  # the refused submission was not recorded
    assert fresh_session.status_code == 404  # nor did the refused chat make a session


async def test_a_tenant_whose_monthly_budget_is_used_gets_429_until_the_next_month(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, session = unique("budget"), unique("chat")
    await set_policy(stack.services.db, tenant, monthly_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, session)
        at = await tokens_used_at(stack.services.db, tenant)
        month_end = seconds_until(next_month(day_of(at)), at)
        with checked_at(at):
            refused = await submit(client, session)
        submissions = (await client.get(f"/v1/sessions/{session}/submissions")).json()

    error = refusal(refused)
    assert month_end - 5 <= error["retryAfterSeconds"] <= month_end + 1
    assert re.fullmatch(
        r"this tenant's monthly token budget of 1 token is used up "
        r"\([\d,]+ tokens in \d{4}-\d\d, UTC\); retry in \d+ s",
        error["message"],
    ), error["message"]
    assert submissions["count"] == 1


async def test_a_used_daily_budget_resets_at_utc_midnight(stack: Stack, gateway: Gateway) -> None:
    """Refused at 23:59:59 of the day the tokens were used, for 1 s; admitted at 00:00:01."""
    tenant = unique("budget")
    await set_policy(stack.services.db, tenant, daily_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, unique("chat"))
        day = day_of(await tokens_used_at(stack.services.db, tenant))
        with checked_at(at_time(day, time(23, 59, 59))):
            last_second = await submit(client, unique("chat"))
        with checked_at(at_time(day + timedelta(days=1), time(0, 0, 1))):
            next_day = await submit(client, unique("chat"))

    assert refusal(last_second)["retryAfterSeconds"] == 1
    assert next_day.status_code == 202, next_day.text


async def test_a_used_monthly_budget_resets_at_the_first_utc_midnight_of_the_next_month(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("budget")
    await set_policy(stack.services.db, tenant, monthly_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, unique("chat"))
        month = day_of(await tokens_used_at(stack.services.db, tenant))
        following = next_month(month)
        with checked_at(at_time(following - timedelta(days=1), time(23, 59, 59))):
            last_second = await submit(client, unique("chat"))
        with checked_at(at_time(month.replace(day=1), time(0, 0, 1))):
            first_second = await submit(client, unique("chat"))
        with checked_at(at_time(following, time(0, 0, 1))):
            next_month_first = await submit(client, unique("chat"))

    assert refusal(last_second)["retryAfterSeconds"] == 1
    assert refusal(first_second)["retryAfterSeconds"] == round(
        seconds_until(following, at_time(month.replace(day=1), time(0, 0, 1)))
    )
    assert next_month_first.status_code == 202, next_month_first.text


async def test_both_budgets_used_retry_after_the_later_reset(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("budget")
    await set_policy(stack.services.db, tenant, daily_tokens=1, monthly_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, unique("chat"))
        at = await tokens_used_at(stack.services.db, tenant)
        month_end = seconds_until(next_month(day_of(at)), at)
        with checked_at(at):
            refused = await submit(client, unique("chat"))

    error = refusal(refused)
    assert month_end - 5 <= error["retryAfterSeconds"] <= month_end + 1
    assert "daily token budget" in error["message"]
    assert "monthly token budget" in error["message"]


async def test_another_tenants_tokens_do_not_count_against_a_budget(
    stack: Stack, gateway: Gateway
) -> None:
    spender, other = unique("budget"), unique("budget")
    for tenant in (spender, other):
        await set_policy(stack.services.db, tenant, daily_tokens=1, monthly_tokens=1)
    keys = ApiKeys.parse(f"spender-key:{spender},other-key:{other}")
    async with (
        gateway("spender-key", api_keys=keys) as spending,
        gateway("other-key", api_keys=keys) as others,
    ):
        await use_a_turn(spending, unique("chat"))
        with checked_at(await tokens_used_at(stack.services.db, spender)):
            refused = await submit(spending, unique("chat"))
            admitted = await submit(others, unique("chat"))

    refusal(refused)
    assert admitted.status_code == 202, admitted.text


async def test_raising_or_clearing_a_used_budget_admits_the_next_submission_at_once(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("budget")
    db = stack.services.db
    await set_policy(db, tenant, daily_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, unique("chat"))
        with checked_at(await tokens_used_at(db, tenant)):
            refused = await submit(client, unique("chat"))
            await set_policy(db, tenant, daily_tokens=10**12)
            raised = await submit(client, unique("chat"))
            await set_policy(db, tenant, daily_tokens=1)
            lowered = await submit(client, unique("chat"))
            await set_policy(db, tenant, daily_tokens=None)
            cleared = await submit(client, unique("chat"))

    refusal(refused)
    assert raised.status_code == 202, raised.text
    refusal(lowered)
    assert cleared.status_code == 202, cleared.text


async def test_a_used_budget_is_refused_before_the_rate_limit_takes_a_token(
    stack: Stack, gateway: Gateway
) -> None:
    """The budget is checked first: a tenant over both gets `budget_exhausted`, whose reset
    is what it must wait for, and keeps its rate token for when the budget is raised."""
    tenant = unique("budget")
    db = stack.services.db
    await set_policy(db, tenant, daily_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys, rate_limit=Rate.parse("2/hour")) as client:
        await use_a_turn(client, unique("chat"))  # the first of two tokens
        with checked_at(await tokens_used_at(db, tenant)):
            refused = await submit(client, unique("chat"))
            await set_policy(db, tenant, daily_tokens=None)
            admitted = await submit(client, unique("chat"))  # the second
            limited = await submit(client, unique("chat"))

    refusal(refused)
    assert admitted.status_code == 202, admitted.text
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"


def test_perdure_tenants_set_sets_and_clears_token_budgets_and_lists_them(
    fresh_cli_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as both:
        cli.main(["tenants", "set", "acme", "--daily-tokens", "5000", "--monthly-tokens", "90000"])
    set_out = capsys.readouterr().out
    with pytest.raises(SystemExit) as listing:
        cli.main(["tenants", "list"])
    listed = capsys.readouterr().out
    with pytest.raises(SystemExit) as cleared:
        cli.main(["tenants", "set", "acme", "--daily-tokens", "none"])
    cleared_out = capsys.readouterr().out

    assert both.value.code == listing.value.code == cleared.value.code == 0
    assert "daily tokens    5000" in set_out and "monthly tokens  90000" in set_out
    header, row = listed.splitlines()
    assert "DAILY TOKENS" in header and "MONTHLY TOKENS" in header
    assert row.split()[-3:-1] == ["5000", "90000"]
    assert "daily tokens    none" in cleared_out
    assert "monthly tokens  90000" in cleared_out  # what is not given stays


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "lots", str(2**63)])
def test_perdure_tenants_set_refuses_a_budget_that_is_not_a_positive_whole_number(
    value: str, fresh_cli_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        cli.main(["tenants", "set", "acme", "--monthly-tokens", value])
    err = capsys.readouterr().err

    assert refused.value.code == 2
    assert "--monthly-tokens" in err and "positive whole number" in err


async def test_set_policy_refuses_a_budget_that_is_not_a_positive_whole_number(
    store: Database,
) -> None:
    for bad in (0, -1, True, 2**63):
        with pytest.raises(ValueError, match="daily_tokens"):
            await set_policy(store, "acme", daily_tokens=bad)

    assert await get_policy(store, "acme") is None
