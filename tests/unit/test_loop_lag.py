"""A worker says in its log when its event loop runs late (before heartbeats time out)."""

import asyncio
import logging
import re
import time

import pytest

from perdure.runtime import loop_lag
from perdure.runtime.loop_lag import watching_loop_lag
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def quick_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_lag, "TICK", 0.02)
    monkeypatch.setattr(loop_lag, "WARN_AFTER", 0.2)


async def test_a_blocked_loop_is_reported_with_how_late_it_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="perdure.worker")
    async with watching_loop_lag() as lag:
        await asyncio.sleep(0.05)  # the watcher is inside a tick when the loop blocks
        time.sleep(0.4)  # noqa: ASYNC251 - blocking the loop is the point
        await eventually(lambda: lag.warnings, what="the late tick reported")

    assert lag.warnings == 1
    assert re.search(r"event loop ran 0\.[4-9] s late", caplog.text)


async def test_a_responsive_loop_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="perdure.worker")
    async with watching_loop_lag() as lag:
        await asyncio.sleep(0.3)  # nothing may be reported: a free loop over several ticks

    assert lag.warnings == 0
    assert caplog.text == ""
