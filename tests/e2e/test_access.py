"""Access: API keys in the store beside PERDURE_API_KEYS, per-tenant rate limits that hold for
every gateway on the store, agent allow-lists, and CORS for browser clients."""

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text, update
from sqlmodel import col

from perdure.commands import cli
from perdure.domain.access import Rate
from perdure.runtime.settings import ApiKeys
from perdure.testing.chat_client import chat_body, send, user_message
from perdure.testing.process_spawner import ProcessSpawner
from perdure.testing.processes import inherited_environment
from perdure.testing.stack import Stack, delete_stored_keys
from storage.access_tables import RateBucketRow
from storage.api_keys import create_key, revoke_key
from storage.tenant_policies import set_policy
from tests.e2e.conftest import Gateway, unique

REPO = Path(__file__).parents[2]


async def submit(client: httpx.AsyncClient, session: str, **options: Any) -> httpx.Response:
    body = {"messages": [user_message("@count 1")], **options}
    return await client.post(f"/v1/sessions/{session}/submissions", json=body)


async def test_a_stored_key_acts_as_its_tenant_beside_the_environment_keys(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, session = unique("acme"), unique("chat")
    made = await create_key(stack.services.db, tenant_id=tenant, name="ci")
    env_keys = {"api_keys": ApiKeys.parse("env-key:other")}

    async with gateway(made.key, **env_keys) as stored, gateway("env-key", **env_keys) as env:
        submitted = await submit(stored, session)
        own = await stored.get(f"/v1/sessions/{session}")
        theirs = await env.get(f"/v1/sessions/{session}")
        env_listing = await env.get("/v1/sessions")

    assert submitted.status_code == 202
    assert own.status_code == 200
    assert theirs.status_code == 404  # another tenant's chat, as an unknown one
    assert env_listing.status_code == 200


async def test_a_stored_key_closes_the_open_gateway_and_revoking_it_does_not_reopen_it(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    """The stack's gateway has no PERDURE_API_KEYS: it is open until the store holds a key."""
    before = await http.get("/v1/sessions")
    made = await create_key(stack.services.db, tenant_id=unique("acme"))
    try:
        anonymous = await http.get("/v1/sessions")
        keyed = await http.get("/v1/sessions", headers={"Authorization": f"Bearer {made.key}"})
        await revoke_key(stack.services.db, key_id=made.row.id)
        after_revoke = await http.get("/v1/sessions")
    finally:
        await delete_stored_keys(stack)

    assert before.status_code == 200
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"
    assert keyed.status_code == 200
    assert after_revoke.status_code == 401


async def test_a_revoked_key_is_refused_on_the_next_request(stack: Stack, gateway: Gateway) -> None:
    made = await create_key(stack.services.db, tenant_id=unique("acme"))
    async with gateway(made.key) as client:
        accepted = await client.get("/v1/sessions")
        await revoke_key(stack.services.db, key_id=made.row.id)
        refused = await client.get("/v1/sessions")

    assert accepted.status_code == 200
    assert refused.status_code == 401


async def test_a_key_is_stored_only_as_its_hash_and_a_short_prefix(stack: Stack) -> None:
    made = await create_key(stack.services.db, tenant_id=unique("acme"))
    try:
        async with stack.services.db.read() as session:
            rows = (await session.exec(text("SELECT * FROM api_keys"))).all()  # type: ignore[call-overload]
    finally:
        await delete_stored_keys(stack)
    ours = next(row._mapping for row in rows if row.id == made.row.id)

    assert made.key.startswith("pk_") and len(made.key) >= 3 + 43  # 32 random bytes
    assert all(made.key not in str(value) for row in rows for value in row)
    assert ours["key_hash"] == hashlib.sha256(made.key.encode()).hexdigest()
    assert made.key.startswith(ours["prefix"]) and len(ours["prefix"]) <= 9


async def test_a_tenant_over_its_rate_gets_429_with_retry_after_and_nothing_is_written(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, session, fresh = unique("busy"), unique("chat"), unique("chat")
    keys = ApiKeys.parse(f"busy-key:{tenant}")
    async with gateway("busy-key", api_keys=keys, rate_limit=Rate.parse("2/hour")) as client:
        first = await submit(client, session, idempotencyKey="first")
        second = await submit(client, session)
        refused = await submit(client, session)
        refused_new = await submit(client, fresh)
        repeated = await submit(client, session, idempotencyKey="first")
        submissions = (await client.get(f"/v1/sessions/{session}/submissions")).json()
        fresh_session = await client.get(f"/v1/sessions/{fresh}")

    assert [first.status_code, second.status_code] == [202, 202]
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 1800  # a token back every 30 minutes
    assert refused_new.status_code == 429
    assert fresh_session.status_code == 404  # the refused request made no session
    assert submissions["count"] == 2  # nor a submission, nor a message
    assert repeated.json()["accepted"] is False  # a repeat returns the original, for free


async def test_the_bucket_admits_again_once_its_time_has_passed(
    stack: Stack, gateway: Gateway
) -> None:
    """The bucket lives in the store: moving its last refill back an hour is an hour passing,
    for every gateway at once."""
    tenant = unique("busy")
    await set_policy(stack.services.db, tenant, rate_limit="1/hour")
    keys = ApiKeys.parse(f"busy-key:{tenant}")
    async with gateway("busy-key", api_keys=keys) as one, gateway("busy-key", api_keys=keys) as two:
        admitted = await submit(one, unique("chat"))
        refused_elsewhere = await submit(two, unique("chat"))
        async with stack.services.db.write() as session:
            await session.exec(
                update(RateBucketRow)
                .where(col(RateBucketRow.tenant_id) == tenant)
                .values(refilled_at=RateBucketRow.refilled_at - 3600)
            )
        admitted_again = await submit(two, unique("chat"))

    assert admitted.status_code == 202
    assert refused_elsewhere.status_code == 429
    assert admitted_again.status_code == 202


async def test_an_agent_outside_the_tenants_allow_list_is_403_on_every_route_that_uses_one(
    stack: Stack, gateway: Gateway
) -> None:
    tenant, session = unique("narrow"), unique("chat")
    await set_policy(stack.services.db, tenant, allowed_agents=["default", "responses"])
    keys = ApiKeys.parse(f"narrow-key:{tenant}")
    async with gateway("narrow-key", api_keys=keys) as client:
        chat = await client.post(
            "/api/chat", json=chat_body(session, user_message("hi"), agent="anthropic")
        )
        submission = await submit(client, session, agent="anthropic")
        schedule = await client.post(
            "/v1/schedules",
            json={"agent": "anthropic", "sessionId": session, "prompt": "hi", "cron": "@daily"},
        )
        allowed = await submit(client, unique("chat"), agent="default")
        untouched = await client.get(f"/v1/sessions/{session}")

    for refused in (chat, submission, schedule):
        assert refused.status_code == 403
        error = refused.json()["error"]
        assert error["code"] == "agent_not_allowed"
        assert "'anthropic'" in error["message"] and "responses" not in error["message"]
    assert allowed.status_code == 202
    assert untouched.status_code == 404


async def test_a_schedule_for_an_allowed_agent_no_worker_serves_names_only_allowed_agents(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("narrow")
    await set_policy(stack.services.db, tenant, allowed_agents=["ghost", "responses"])
    keys = ApiKeys.parse(f"narrow-key:{tenant}")
    async with gateway("narrow-key", api_keys=keys) as client:
        schedule = await client.post(
            "/v1/schedules",
            json={"agent": "ghost", "sessionId": unique("chat"), "prompt": "hi", "cron": "@daily"},
        )

    assert schedule.status_code == 422
    error = schedule.json()["error"]
    assert error["code"] == "unknown_agent"
    assert error["message"] == "unknown agent 'ghost'; the workers serve: responses"


async def test_a_chat_with_an_allowed_agent_no_worker_serves_names_only_allowed_agents(
    stack: Stack, gateway: Gateway
) -> None:
    tenant = unique("narrow")
    await set_policy(stack.services.db, tenant, allowed_agents=["ghost", "responses"])
    keys = ApiKeys.parse(f"narrow-chat-key:{tenant}")
    async with gateway("narrow-chat-key", api_keys=keys) as client:
        streamed = await send(client, unique("chat"), "@count 2", agent="ghost")

    assert streamed.types()[-1] == "error"
    assert streamed.chunks[-1]["errorText"].endswith(
        "unknown agent 'ghost'; this worker serves: responses"
    )


@pytest.mark.store_agnostic
async def test_a_browser_preflight_from_an_allowed_origin_is_answered(gateway: Gateway) -> None:
    origin = "https://app.example.com"
    async with gateway(cors_origins=(origin,)) as client:
        preflight = await client.options(
            "/api/chat",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type,idempotency-key",
            },
        )
        stranger = await client.options(
            "/api/chat",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )

    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    allowed = preflight.headers["access-control-allow-headers"].lower()
    assert {"authorization", "content-type", "idempotency-key", "last-event-id"} <= {
        header.strip() for header in allowed.split(",")
    }
    assert stranger.status_code == 400
    assert "access-control-allow-origin" not in stranger.headers


@pytest.mark.store_agnostic
async def test_a_cross_origin_response_exposes_perdures_headers_and_none_without_cors(
    gateway: Gateway, http: httpx.AsyncClient
) -> None:
    origin = "http://localhost:3000"
    async with gateway(cors_origins=(origin,)) as client:
        allowed = await client.get("/v1/sessions", headers={"Origin": origin})
    plain = await http.get("/v1/sessions", headers={"Origin": origin})

    assert allowed.headers["access-control-allow-origin"] == origin
    exposed = allowed.headers["access-control-expose-headers"].lower()
    assert "x-perdure-submission-id" in exposed and "x-request-id" in exposed
    assert "access-control-allow-origin" not in plain.headers


def test_perdure_keys_prints_a_key_once_and_never_lists_it(
    tmp_path: Path, spawner: ProcessSpawner
) -> None:
    env = {**inherited_environment(), "PYTHONPATH": str(REPO), "PERDURE_DATA_DIR": str(tmp_path)}
    created = spawner.run(
        ["keys", "create", "--tenant", "acme", "--name", "ci bot"], env, cwd=tmp_path
    )
    key = created.stdout.strip()
    listed = spawner.run(["keys", "list"], env, cwd=tmp_path)
    key_id = listed.stdout.splitlines()[1].split()[0]
    revoked = spawner.run(["keys", "revoke", key_id], env, cwd=tmp_path)

    assert created.returncode == 0, created.stderr
    assert key.startswith("pk_") and "\n" not in key
    assert key not in created.stderr
    assert listed.returncode == 0
    assert key not in listed.stdout + listed.stderr
    assert "acme" in listed.stdout and "ci bot" in listed.stdout
    assert f"{key[:9]}…" in listed.stdout  # the prefix, to recognise it by
    assert revoked.returncode == 0 and "revoked" in revoked.stdout


def test_perdure_keys_names_an_unknown_key_or_a_bad_tenant(
    fresh_cli_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as unknown:
        cli.main(["keys", "revoke", "key_nope"])
    unknown_err = capsys.readouterr().err
    with pytest.raises(SystemExit) as bad_tenant:
        cli.main(["keys", "create", "--tenant", "not a tenant"])
    bad_tenant_err = capsys.readouterr().err

    assert unknown.value.code == 1
    assert "perdure keys revoke: no key 'key_nope'" in unknown_err
    assert bad_tenant.value.code == 2
    assert "a tenant must be" in bad_tenant_err
