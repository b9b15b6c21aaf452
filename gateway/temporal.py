"""Temporal calls from the gateway, bounded in time.

The Temporal client retries an unreachable server for up to 10 s (`RetryConfig`'s
`max_elapsed_time`; `rpc_timeout` only bounds each attempt), which is where a 9 s plain-text
500 came from. A request must not wait that long: a call that has not answered after a
quarter of a second is checked with a health probe (never retried, so it fails at once when
the server is down), and every call has a deadline. Either way the call is cancelled, which
drops its pending retries, and the client gets a 503 with `Retry-After`.
"""

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from temporalio.client import Client

from gateway.errors import TEMPORAL_UNAVAILABLE, ApiError, temporal_unreachable, unavailable

T = TypeVar("T")

TEMPORAL_TIMEOUT_SECONDS = 15.0
"""A start or cancel takes tens of milliseconds when Temporal is up, but hundreds of chats
started at once queue at a live server: the health probe gives up on a dead server within a
second, so this deadline only bounds a live one that is very slow."""
PROBE_AFTER_SECONDS = 0.25
PROBE_TIMEOUT = timedelta(seconds=5)
"""A dead server fails the probe at once (connection refused); a live one busy with hundreds of
starts may take seconds to answer it, and must not be mistaken for a dead one."""


def _unreachable() -> ApiError:
    return unavailable(
        TEMPORAL_UNAVAILABLE, "Temporal cannot be reached; nothing was changed. Retry shortly."
    )


async def _healthy(client: Client) -> bool:
    try:
        return await client.service_client.check_health(timeout=PROBE_TIMEOUT)
    except Exception:  # noqa: BLE001 - any failure of the probe means unreachable
        return False


async def temporal_call(call: Awaitable[T], *, within: float, client: Client | None = None) -> T:
    """`call`, or an `ApiError(503)` when Temporal is unreachable or does not answer in time.

    With `client`, a call still running after `PROBE_AFTER_SECONDS` is given up at once if
    the server does not pass a health check.
    """
    task = asyncio.ensure_future(call)
    try:
        async with asyncio.timeout(within):
            if client is not None:
                done, _ = await asyncio.wait({task}, timeout=PROBE_AFTER_SECONDS)
                if not done and not await _healthy(client):
                    raise _unreachable()
            return await task
    except TimeoutError:
        raise unavailable(
            TEMPORAL_UNAVAILABLE,
            f"Temporal did not answer within {within:g} s; nothing was changed. Retry shortly.",
        ) from None
    except ApiError:
        raise
    except Exception as error:
        if temporal_unreachable(error):
            raise _unreachable() from error
        raise
    finally:
        task.cancel()  # a no-op once it is done; otherwise it also drops the client's retries
