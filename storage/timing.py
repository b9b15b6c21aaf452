"""Wall-clock time for rows (seconds since the epoch), and the one seam that sets it: a caller
runs code under `clock(...)` to give it another time (a specification of what depends on the
date, such as token budgets resetting at 00:00 UTC, sets the time instead of waiting for it).

The clock is a context variable: it holds in the block's own context and in the tasks started
from it (a request served in process, e.g. through `httpx.ASGITransport`), never in other
tasks, store threads or processes, which keep the wall clock. Nothing is patched globally.
"""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Clock = Callable[[], float]
"""Seconds since the epoch, as `time.time`."""

_clock: ContextVar[Clock] = ContextVar("storage_clock", default=time.time)


def now() -> float:
    return _clock.get()()


@contextmanager
def clock(source: Clock) -> Iterator[None]:
    """`now()` answers `source()` in this context until the block ends."""
    token = _clock.set(source)
    try:
        yield
    finally:
        _clock.reset(token)
