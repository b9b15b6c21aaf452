"""Usage (docs/usage.md): every model step records what its provider reported; a turn's
totals end its stream, in the `finish` chunk's message metadata, and stay in the stored
message."""

import uuid
from typing import Any

import httpx
import pytest
from sqlmodel import col, select

from perdure.domain.prices import PriceTable
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import Streamed, send
from perdure.testing.stack import Stack
from storage.db import Database
from storage.usage import utc_day
from storage.usage_tables import ModelUsageRow
from tests.e2e.conftest import Gateway, unique


def new_session() -> str:
    return f"usage-{uuid.uuid4().hex[:12]}"


def usage_of(streamed: Streamed) -> dict[str, Any]:
    finish = streamed.chunks[-1]
    assert finish["type"] == "finish", streamed.types()
    usage: dict[str, Any] = finish["messageMetadata"]["usage"]
    return usage


async def stored_usage(http: httpx.AsyncClient, session: str) -> dict[str, Any]:
    messages = (await http.get(f"/api/chat/{session}/messages")).json()
    usage: dict[str, Any] = messages[-1]["metadata"]["usage"]
    return usage


async def test_a_turns_usage_ends_its_stream_and_stays_in_the_stored_message(
    http: httpx.AsyncClient,
) -> None:
    session = new_session()
    streamed = await send(http, session, "@count 3")

    usage = usage_of(streamed)
    assert usage["outputTokens"] == 3  # the fake reports one token a word
    assert usage["inputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert usage["cachedInputTokens"] == usage["reasoningTokens"] == 0
    assert await stored_usage(http, session) == usage


async def test_a_turn_of_two_model_steps_counts_both(http: httpx.AsyncClient) -> None:
    one_step = usage_of(await send(http, new_session(), "@count 3"))
    two_steps = usage_of(await send(http, new_session(), '@tool calculate {"expression": "1+1"}'))

    # The second step reads the first step's call and result: more input than one step.
    assert two_steps["inputTokens"] > 2 * one_step["inputTokens"] - 1
    assert two_steps["outputTokens"] > 0


TOKENS = ("inputTokens", "cachedInputTokens", "outputTokens", "reasoningTokens", "totalTokens")


def totals(*usages: dict[str, Any]) -> dict[str, int]:
    return {key: sum(usage[key] for usage in usages) for key in TOKENS}


def tokens_of(row: dict[str, Any]) -> dict[str, int]:
    return {key: row[key] for key in TOKENS}


async def test_usage_sums_a_tenants_turns_by_session_and_prices_them(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, other = unique("usage"), unique("usage")
    keys = ApiKeys.parse(f"usage-mine:{tenant},usage-theirs:{other}")
    prices = PriceTable.model_validate({stack.settings.model: {"input": 2.0, "output": 8.0}})
    one, two = unique("chat"), unique("chat")
    async with (
        gateway("usage-mine", api_keys=keys, prices=prices) as mine,
        gateway("usage-theirs", api_keys=keys) as theirs,
    ):
        first = usage_of(await send(mine, one, "@count 3"))
        second = usage_of(await send(mine, one, "@count 2"))
        third = usage_of(await send(mine, two, "@count 4"))
        await send(theirs, unique("chat"), "@count 5")
        report = await mine.get("/v1/usage", params={"group_by": "session"})
        their_report = (await theirs.get("/v1/usage")).json()

    assert report.status_code == 200, report.text
    body = report.json()
    rows = {row["session"]: row for row in body["rows"]}
    assert set(rows) == {one, two}
    assert tokens_of(rows[one]) == totals(first, second)
    assert tokens_of(rows[two]) == totals(third)
    assert rows[one]["modelCalls"] == 2
    assert tokens_of(body["total"]) == totals(first, second, third)
    spent = totals(first, second, third)
    assert body["total"]["costUsd"] == pytest.approx(
        (spent["inputTokens"] * 2.0 + spent["outputTokens"] * 8.0) / 1e6
    )
    assert body["unpricedModels"] == []
    assert their_report["total"]["modelCalls"] == 1  # only its own turn, and no price table
    assert their_report["total"]["costUsd"] is None


async def call_day(db: Database, tenant: str) -> str:
    """The UTC day of the instant the store recorded the tenant's one model call at (not the
    wall clock's day now, which may be the next)."""
    async with db.read() as session:
        statement = select(ModelUsageRow.at).where(col(ModelUsageRow.tenant_id) == tenant)
        (at,) = (await session.exec(statement)).all()
    return utc_day(at)


async def test_usage_is_summed_by_day_agent_and_model_within_the_range(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("usage")
    keys = ApiKeys.parse(f"usage-days:{tenant}")
    async with gateway("usage-days", api_keys=keys) as client:
        usage = usage_of(await send(client, unique("chat"), "@count 3"))
        grouped = (await client.get("/v1/usage", params={"group_by": "day,agent,model"})).json()
        later = await client.get("/v1/usage", params={"start": "2100-01-01T00:00:00Z"})

    (row,) = grouped["rows"]
    assert row["day"] == await call_day(stack.services.db, tenant)
    assert (row["agent"], row["model"]) == ("default", stack.settings.model)
    assert row["session"] is None
    assert tokens_of(row) == totals(usage)
    assert later.status_code == 422  # the default end (now) is before that start


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "tenant"}, "group_by"),
        ({"group_by": "day,day"}, "group_by"),
        ({"start": "2026-01-02", "end": "2026-01-01"}, "end"),
        ({"start": "2020-01-01", "end": "2026-01-01"}, "start"),
        ({"start": "yesterday"}, "start"),
    ],
)
async def test_a_bad_usage_query_is_a_422_naming_its_field(
    http: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    response = await http.get("/v1/usage", params=params)

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [problem["field"] for problem in error["problems"]] == [f"query.{field}"]


async def test_a_range_at_the_edge_of_time_is_refused_or_empty_never_a_server_error(
    http: httpx.AsyncClient,
) -> None:
    too_early = await http.get("/v1/usage", params={"end": "0001-01-02T00:00:00Z"})
    far = await http.get(
        "/v1/usage", params={"start": "9999-12-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"}
    )

    assert too_early.status_code == 422, too_early.text
    assert far.status_code == 200, far.text
    assert far.json()["total"]["modelCalls"] == 0


async def test_a_deleted_sessions_usage_still_counts_for_its_tenant_under_no_session(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, chat = unique("usage"), unique("chat")
    keys = ApiKeys.parse(f"usage-deleted:{tenant}")
    async with gateway("usage-deleted", api_keys=keys) as client:
        usage = usage_of(await send(client, chat, "@count 3"))
        deleted = await client.delete(f"/v1/sessions/{chat}")
        report = (await client.get("/v1/usage", params={"group_by": "session"})).json()

    assert deleted.status_code == 204
    (row,) = report["rows"]
    assert row["session"] is None
    assert tokens_of(row) == tokens_of(report["total"]) == totals(usage)
