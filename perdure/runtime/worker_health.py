"""A worker's `/healthz`, served beside its `/metrics` on their own thread.

The checks themselves (the store and Temporal, perdure/runtime/health.py) run on the worker's
event loop, the one its activities and heartbeats share: a loop too busy to run them within
`LOOP_SECONDS` is reported as the fault it is, instead of a health that only proves the metrics
thread is alive.
"""

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from perdure.runtime.health import CHECK_SECONDS, healthy

LOOP_SECONDS = 1.0
"""How late the worker's loop may start the checks; the answer comes within this and
`CHECK_SECONDS`."""

Checks = Callable[[], Coroutine[Any, Any, dict[str, str]]]


class WorkerHealth:
    """What the worker is doing (starting, polling, stopping) and, while it polls, the checks
    of what it depends on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "starting"
        self._polling: tuple[asyncio.AbstractEventLoop, Checks] | None = None

    def polling(self, checks: Checks) -> None:
        """The worker polls from the running loop; `checks` are run there on each probe."""
        with self._lock:
            self._state = "ok"
            self._polling = (asyncio.get_running_loop(), checks)

    def stopping(self) -> None:
        with self._lock:
            self._state = "shutting down"
            self._polling = None

    def answer(self) -> tuple[bool, dict[str, str]]:
        """Whether the worker is healthy, and each check; from any thread but the loop's,
        within `LOOP_SECONDS + CHECK_SECONDS`."""
        with self._lock:
            state, polling = self._state, self._polling
        if polling is None:
            return False, {"worker": state}
        loop, checks = polling
        try:
            future = asyncio.run_coroutine_threadsafe(checks(), loop)
        except RuntimeError:  # the loop closed between the two
            return False, {"worker": "stopped"}
        try:
            result = future.result(timeout=LOOP_SECONDS + CHECK_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return False, {
                "worker": f"unresponsive: its event loop did not run the checks within "
                f"{LOOP_SECONDS + CHECK_SECONDS:g} s"
            }
        checked = {"worker": state, **result}
        return healthy(checked), checked
