"""Time limits on the waits of a stream that waits once per event.

An `asyncio.timeout` per wait costs a timer per event (a heap push, and a cancelled handle the
loop sweeps later): with a read timeout and a stall timeout around every provider delta, about
a sixth of a busy worker's event loop (docs/benchmarks.md). A `WaitDeadline` keeps
one timer per period instead: a wait only notes when it began, and the timer, when it fires,
either ends the wait that has lasted too long or is set again for the one under way.
"""

import asyncio
from collections.abc import Callable


class WaitDeadline:
    """Each wait between `begin()` and `end()` that lasts `seconds` calls `on_expiry` (which
    makes the wait fail); at most one timer is pending at a time."""

    def __init__(self, seconds: float, on_expiry: Callable[[], None]) -> None:
        self.seconds = seconds
        self._on_expiry = on_expiry
        self._loop = asyncio.get_running_loop()
        self._since: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def begin(self) -> None:
        self._since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(self._since + self.seconds, self._check)

    def end(self) -> None:
        self._since = None

    def close(self) -> None:
        self._since = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self._since is None:
            return  # between waits: the next `begin` sets the timer again
        due = self._since + self.seconds
        if self._loop.time() >= due:
            self._since = None
            self._on_expiry()
            return
        self._timer = self._loop.call_at(due, self._check)
