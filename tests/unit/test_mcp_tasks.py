"""An MCP call's task in the answer's log, and how often it is polled (docs/mcp.md#tasks)."""

from datetime import timedelta

import pytest

from activities.mcp_tasks import MAX_POLL_SECONDS, MIN_POLL_SECONDS, _poll_seconds
from perdure.domain.mcp_tasks import TaskSeen, known_task, open_tasks, task_chunk
from perdure.domain.reducer import reduce_chunks
from perdure.mcp_servers import McpServer

SEEN = TaskSeen("t-1", "working", "queued", 200, started_at=1_000.0)


def test_the_log_gives_back_the_calls_task_as_last_seen() -> None:
    later = SEEN.moved_to("working", "step 2 of 3")
    parts = reduce_chunks(
        [task_chunk("call-1", "jobs", SEEN), task_chunk("call-1", "jobs", later)]
    ).parts

    assert known_task(parts, "call-1") == later
    assert [part["type"] for part in parts] == ["data-mcp-task"]  # one part, replaced


def test_another_calls_task_is_not_this_ones() -> None:
    parts = reduce_chunks([task_chunk("call-1", "jobs", SEEN)]).parts

    assert known_task(parts, "call-2") is None


def test_a_poll_that_changes_nothing_shows_nothing_new() -> None:
    assert SEEN.with_interval(500).shown == SEEN.shown
    assert SEEN.moved_to("working", "step 1 of 3").shown != SEEN.shown


@pytest.mark.parametrize(
    ("interval_ms", "seconds"),
    [(None, 1.0), (0, MIN_POLL_SECONDS), (250, 0.25), (3_600_000, MAX_POLL_SECONDS)],
)
def test_the_servers_poll_interval_is_honoured_within_bounds(
    interval_ms: int | None, seconds: float
) -> None:
    assert _poll_seconds(interval_ms) == seconds


def test_a_task_timeout_beyond_a_tool_calls_ten_minutes_is_refused() -> None:
    with pytest.raises(ValueError, match="task_timeout must be above 0 and at most 0:09:00"):
        McpServer(name="jobs", url="http://127.0.0.1:1/mcp", task_timeout=timedelta(minutes=20))


def test_a_turn_that_ends_leaves_only_its_running_tasks_to_cancel() -> None:
    done = TaskSeen("t-2", "completed", "done", None, started_at=1_000.0)
    parts = reduce_chunks(
        [task_chunk("call-1", "jobs", SEEN), task_chunk("call-2", "jobs", done)]
    ).parts

    assert open_tasks(parts) == [("jobs", "t-1")]
