"""A gateway and a worker cut off from Temporal or from the store by a partition (their
connections held open and silent, not closed) say so within their bounds: each `GET /healthz`
answers 503 naming what did not answer, requests are refused with the documented 503 and nothing
half-written, and once the link heals both are healthy again and the gateway answers exactly, the
refused message too (docs/api.md, docs/operations.md, docs/recovery.md). The embedded SQLite
store has no link to cut."""

import asyncio
import uuid
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from gateway.store_deadline import BOUND_SECONDS
from gateway.temporal import PROBE_AFTER_SECONDS, PROBE_TIMEOUT
from perdure.runtime.health import CHECK_SECONDS
from perdure.runtime.temporal_dev import split_address
from perdure.testing.chat_client import chat_body, counting, send, user_message
from perdure.testing.cluster import Cluster
from perdure.testing.stack import free_port
from perdure.testing.tcp_proxy import tcp_proxy
from tests.waiting import eventually

SLACK_SECONDS = 8.0
"""Added to each bound for a loaded 2-core machine: a gateway that waits out the partition
(the fault these specs guard against) still fails them, as the partition lasts until the end."""


async def health(url: str) -> tuple[int, dict[str, str]]:
    """`/healthz`'s status and checks; an answer later than its bound (and the slack) fails
    the spec with a read timeout."""
    async with httpx.AsyncClient(timeout=CHECK_SECONDS + SLACK_SECONDS) as http:
        answer = await http.get(f"{url}/healthz")
    return answer.status_code, answer.json()["checks"]


async def healthy(url: str) -> bool:
    try:
        return (await health(url))[0] == 200
    except httpx.ConnectError:  # a worker's health is served once the process has started
        return False


def health_served_worker(cluster: Cluster, **extra_env: str) -> str:
    """A worker serving `/healthz` on a port of its own: that port's URL."""
    port = free_port()
    cluster.worker(PERDURE_METRICS_PORT=str(port), **extra_env)
    return f"http://127.0.0.1:{port}"


async def answers_exactly(url: str) -> None:
    session = f"healed-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        streamed = await send(http, session, f"@count 20 {session}")
    assert streamed.text() == counting(20)


# One store: the fault is between the processes and Temporal; the store stays reachable (and
# the spec below cuts off the scale-out one).
@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
async def test_a_gateway_cut_off_from_temporal_says_so_and_is_well_once_it_heals(
    cluster: Cluster,
) -> None:
    async with cluster.temporal():
        async with tcp_proxy(*split_address(cluster.temporal_address)) as link:
            worker = health_served_worker(cluster, TEMPORAL_ADDRESS=link.address)
            url = await cluster.gateway(TEMPORAL_ADDRESS=link.address)
            await eventually(lambda: healthy(worker), what="the worker polling")
            assert await healthy(url)

            link.silence()
            status, checks = await health(url)
            worker_status, worker_checks = await health(worker)
            refusal_bound = PROBE_AFTER_SECONDS + PROBE_TIMEOUT.total_seconds() + SLACK_SECONDS
            async with httpx.AsyncClient(base_url=url, timeout=refusal_bound) as http:
                body = chat_body(f"cut-{uuid.uuid4().hex[:8]}", user_message("hello"))
                refused = await http.post("/api/chat", json=body)

            assert status == 503, checks
            assert checks["store"] == "ok"
            assert checks["temporal"].startswith("unreachable"), checks
            assert worker_status == 503, worker_checks
            assert worker_checks["store"] == "ok"
            assert worker_checks["temporal"].startswith("unreachable"), worker_checks
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "temporal_unavailable"
            assert refused.headers["retry-after"]

            link.restore()
            await eventually(lambda: healthy(url), what="the gateway healthy again")
            await eventually(lambda: healthy(worker), what="the worker healthy again")
            await answers_exactly(url)


async def test_a_gateway_cut_off_from_the_store_says_so_and_is_well_once_it_heals(
    postgres_cluster: Cluster,
) -> None:
    cluster = postgres_cluster
    store = urlsplit(cluster.env["PERDURE_DATABASE_URL"])
    assert store.hostname is not None and store.port is not None
    async with cluster.temporal(), tcp_proxy(store.hostname, store.port) as link:
        proxied = urlunsplit(store._replace(netloc=f"{store.username}@{link.address}"))
        worker = health_served_worker(cluster, PERDURE_DATABASE_URL=proxied)
        url = await cluster.gateway(PERDURE_DATABASE_URL=proxied)
        await eventually(lambda: healthy(worker), what="the worker polling")
        assert await healthy(url)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            # Several pooled connections, idle when the link is cut: a request that takes one
            # waits on it as on a real partition (nothing refuses or resets it).
            await asyncio.gather(*(http.get("/v1/sessions") for _ in range(8)))

        link.silence()
        status, checks = await health(url)
        worker_status, worker_checks = await health(worker)
        session = f"cut-{uuid.uuid4().hex[:8]}"
        async with httpx.AsyncClient(base_url=url, timeout=BOUND_SECONDS + SLACK_SECONDS) as http:
            refused = await http.post(
                "/api/chat", json=chat_body(session, user_message(f"@count 5 {session}"))
            )
            listing = await http.get("/v1/sessions")

        assert status == 503, checks
        assert checks["temporal"] == "ok"
        assert checks["store"].startswith("unreachable"), checks
        assert worker_status == 503, worker_checks
        assert worker_checks["temporal"] == "ok"
        assert worker_checks["store"].startswith("unreachable"), worker_checks
        for answer in (refused, listing):
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "store_unavailable"
            assert answer.headers["retry-after"]

        link.restore()
        await eventually(lambda: healthy(url), what="the gateway healthy again")
        await eventually(lambda: healthy(worker), what="the worker healthy again")
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            again = await send(http, session, f"@count 5 {session}")

            async def one_exchange() -> bool:
                history = (await http.get(f"/api/chat/{session}/messages")).json()
                return [message["role"] for message in history] == ["user", "assistant"]

            await eventually(one_exchange, what="one exchange: the refused message left nothing")
        assert again.text() == counting(5)
        await answers_exactly(url)
