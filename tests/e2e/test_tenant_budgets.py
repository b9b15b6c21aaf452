"""Token budgets: a tenant's daily and monthly tokens (input + output, UTC), read from the store
at each intake, so every gateway refuses a tenant that used its budget (429 budget_exhausted,
Retry-After until the budget resets) and a policy change holds at once."""

import asyncio
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from perdure.commands import cli
from perdure.domain.access import Rate
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import chat_body, send, user_message
from perdure.testing.stack import Stack
from storage.db import Database
from storage.tenant_policies import get_policy, set_policy
from tests.e2e.conftest import Gateway, unique

MARGIN_SECONDS = 60.0
"""Longer than any spec here takes."""


@pytest.fixture(autouse=True)
async def clear_of_a_utc_midnight() -> None:
    """Budgets reset at 00:00 UTC: a spec that would cross it waits until it has passed, so
    the tokens it uses and the check that refuses them fall on one day (and one month)."""
    left = seconds_until(datetime.now(UTC).date() + timedelta(days=1))
    if left < MARGIN_SECONDS:
        await asyncio.sleep(left + 1)


async def submit(client: httpx.AsyncClient, session: str) -> httpx.Response:
    body = {"messages": [user_message("@count 1")]}
    return await client.post(f"/v1/sessions/{session}/submissions", json=body)


async def use_a_turn(client: httpx.AsyncClient, session: str) -> None:
    """One turn to its end: its tokens are in the store when its stream is over."""
    streamed = await send(client, session, "@count 3")
    assert streamed.status == 200 and streamed.types()[-1] == "finish", streamed.types()


def seconds_until(day: date) -> float:
    return datetime.combine(day, datetime.min.time(), UTC).timestamp() - time.time()


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
        midnight = seconds_until(datetime.now(UTC).date() + timedelta(days=1))
        refused = await submit(client, session)
        refused_chat = await client.post("/api/chat", json=chat_body(fresh, user_message("hi")))
        submissions = (await client.get(f"/v1/sessions/{session}/submissions")).json()
        fresh_session = await client.get(f"/v1/sessions/{fresh}")

    error = refusal(refused)
    assert midnight - 5 <= error["retryAfterSeconds"] <= midnight + 1
    assert "daily token budget (1 tokens)" in error["message"]
    assert "monthly" not in error["message"]
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
        month_end = seconds_until(next_month(datetime.now(UTC).date()))
        refused = await submit(client, session)
        submissions = (await client.get(f"/v1/sessions/{session}/submissions")).json()

    error = refusal(refused)
    assert month_end - 5 <= error["retryAfterSeconds"] <= month_end + 1
    assert "monthly token budget (1 tokens)" in error["message"]
    assert "daily" not in error["message"]
    assert submissions["count"] == 1


async def test_both_budgets_used_retry_after_the_later_reset(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("budget")
    await set_policy(stack.services.db, tenant, daily_tokens=1, monthly_tokens=1)
    keys = ApiKeys.parse(f"budget-key:{tenant}")
    async with gateway("budget-key", api_keys=keys) as client:
        await use_a_turn(client, unique("chat"))
        month_end = seconds_until(next_month(datetime.now(UTC).date()))
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
