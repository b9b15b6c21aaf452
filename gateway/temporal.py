"""Temporal calls from the gateway, bounded in time.

The Temporal client retries an unreachable server for up to 10 s (`RetryConfig`'s
`max_elapsed_time`; `rpc_timeout` only bounds each attempt), which is where a 9 s plain-text
500 came from. A request must not wait that long: a call that has not answered after a
quarter of a second is checked with a health probe (never retried, so it fails at once when
the server is down), and every call has a deadline. Either way the call is cancelled, which
drops its pending retries, and the client gets a 503 with `Retry-After`.

Why not the client's own knobs alone (`RetryConfig(max_elapsed_time_millis=1000)` on the
connection, `rpc_timeout` per call), measured by `bench/temporal_deadlines.py`
(docs/benchmarks.md): a killed server fails a start in 0.8 s that way (0.25 s here), but a hung
one (SIGSTOP) only at the 15 s `rpc_timeout` (5.25 s here); and the retry configuration is the
connection's, which a node's worker shares for eager start, so it would cut the worker's own
retries to a second too.
"""

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar
from weakref import WeakKeyDictionary

from temporalio.client import Client

from gateway.errors import TEMPORAL_UNAVAILABLE, ApiError, temporal_unreachable, unavailable
from storage.reachability import SharedProbe

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


PROBE_FRESH_SECONDS = 1.0
"""A passed probe vouches for the server this long: slow calls of a burst share it."""


async def _passes_health_check(client: Client) -> bool:
    try:
        return await client.service_client.check_health(timeout=PROBE_TIMEOUT)
    except Exception:  # noqa: BLE001 - any failure of the probe means unreachable
        return False


_probes: WeakKeyDictionary[Client, SharedProbe] = WeakKeyDictionary()


async def _healthy(client: Client) -> bool:
    """One health probe at a time per client: a burst of hundreds of slow starts would
    otherwise send hundreds of probes to a server that is slow because it is busy."""
    probe = _probes.get(client)
    if probe is None:
        probe = _probes[client] = SharedProbe(
            lambda: _passes_health_check(client), fresh_seconds=PROBE_FRESH_SECONDS
        )
    return await probe.answers()


async def temporal_call(call: Awaitable[T], *, within: float, client: Client | None = None) -> T:
    """`call`, or an `ApiError(503)` when Temporal is unreachable or does not answer in time.

    With `client`, a call still running after `PROBE_AFTER_SECONDS` is given up at once if
    the server does not pass a health check, checked again every `PROBE_FRESH_SECONDS`.
    """
    task = asyncio.ensure_future(call)
    try:
        async with asyncio.timeout(within):
            if client is not None:
                # Re-checked while the call runs, so a server that dies meanwhile is noticed
                # within about a second; the probes are shared, one per second at most.
                wait = PROBE_AFTER_SECONDS
                while not (await asyncio.wait({task}, timeout=wait))[0]:
                    if not await _healthy(client):
                        raise _unreachable()
                    wait = PROBE_FRESH_SECONDS
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


class GatewayDeadline:
    """The gateway's bound on the lifecycle's Temporal calls (turn_control/lifecycle.py): a
    503 within about a second when Temporal is down. A patient call (in the background, after
    Temporal was found unreachable) waits ten times longer, unprobed."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __call__(self, call: Awaitable[T], *, patient: bool = False) -> Awaitable[T]:
        if patient:
            return temporal_call(call, within=10 * TEMPORAL_TIMEOUT_SECONDS)
        return temporal_call(call, within=TEMPORAL_TIMEOUT_SECONDS, client=self._client)
